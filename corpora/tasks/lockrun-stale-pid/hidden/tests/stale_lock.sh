#!/bin/sh
# Judged apart: this file runs in the judge; lockrun.sh runs in the jail (`jail`), in this
# shell's current folder, which the jail shares.
set -eu
script="$JAIL_WORKSPACE/lockrun.sh"

# a pid no process of the jail holds: the jail's own shell, after it exited
gone=$(jail sh -c 'sh -c "echo \$\$"')
echo "$gone" > job.lock
jail sh "$script" job.lock sh -c 'echo ran > out.txt' 2>/dev/null
[ "$(cat out.txt)" = ran ]
[ ! -e job.lock ]

printf 'garbage\n' > odd.lock
jail sh "$script" odd.lock sh -c 'echo again > out2.txt' 2>/dev/null
[ "$(cat out2.txt)" = again ]
exit 0
