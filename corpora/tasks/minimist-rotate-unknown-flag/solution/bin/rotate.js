#!/usr/bin/env node
'use strict';

// rotate: rotate a service's log files, keeping the newest --keep of them.

const parseArgs = require('../index.js');
const { plan } = require('../lib/plan.js');

function main(argv) {
  const unknown = [];
  const args = parseArgs(argv, {
    boolean: ['dry-run', 'help'],
    string: ['dir', 'keep'],
    default: { keep: 7, dir: '/var/log/app' },
    unknown: (arg) => {
      if (arg.startsWith('-')) unknown.push(arg);
      return !arg.startsWith('-');
    },
  });
  if (unknown.length) {
    process.stderr.write(`rotate: unknown option ${unknown[0]}\n`);
    return 64;
  }
  if (args.help) {
    process.stdout.write('usage: rotate [--dir DIR] [--keep N] [--dry-run] FILE...\n');
    return 0;
  }
  const keep = Number(args.keep);
  if (!Number.isInteger(keep) || keep < 1) {
    process.stderr.write(`rotate: --keep must be a positive whole number, not ${args.keep}\n`);
    return 1;
  }
  for (const step of plan(args._.map(String), keep)) {
    process.stdout.write(`${args['dry-run'] ? 'would ' : ''}${step}\n`);
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
