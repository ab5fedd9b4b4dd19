#!/usr/bin/env node
'use strict';

// deploy: print the plan for deploying a service build.

const mri = require('../lib/index.js');

function main(argv) {
  const args = mri(argv, {
    boolean: ['dry-run'],
    string: ['region', 'build'],
    alias: { r: 'region', b: 'build' },
    default: { region: 'eu-central-2' },
  });
  const [service] = args._;
  if (!service || !args.build) {
    process.stderr.write('usage: deploy SERVICE --build ID [--region R] [--dry-run]\n');
    return 2;
  }
  const plan = { service, build: args.build, region: args.region, dryRun: Boolean(args['dry-run']) };
  process.stdout.write(JSON.stringify(plan) + '\n');
  return 0;
}

process.exitCode = main(process.argv.slice(2));
