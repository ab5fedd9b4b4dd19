#!/bin/sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

check "just below the default critical level" 1 "DISK WARNING - /var 91% /srv 87%" df-mixed.txt
check "above the default critical level" 2 "DISK CRITICAL - /var 93%" df-full.txt
check "explicit critical level" 1 "DISK WARNING - /var 93%" df-full.txt -c 95
check "explicit lower critical level" 2 "DISK CRITICAL" df-mixed.txt -c 90
check "bad critical level" 3 "DISK UNKNOWN" df-ok.txt -c 0
finish
