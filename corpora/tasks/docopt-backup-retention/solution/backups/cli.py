"""Take and prune database backups.

Usage:
  backup.py take <database> [--target=DIR]
  backup.py prune [--target=DIR] [--retention=DAYS] [--dry-run]
  backup.py -h | --help

Options:
  --target=DIR  Where backups are written [default: /srv/backups].
  --retention=DAYS  Keep backups this many days [default: 35].
  --dry-run     Only list what would be removed.
"""

import sys

from docopt import docopt

from backups.store import expired, take


def main(argv=None):
    args = docopt(__doc__, argv=argv)
    if args["take"]:
        print(take(args["<database>"], args["--target"]))
        return 0
    for name in expired(args["--target"], keep_days=int(args["--retention"])):
        print(("would remove " if args["--dry-run"] else "removed ") + name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
