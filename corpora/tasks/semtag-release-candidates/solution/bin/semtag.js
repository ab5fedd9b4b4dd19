#!/usr/bin/env node
'use strict';

const { parse, format, bump, nextCandidate, promote, VersionError } = require('../src/version');

const USAGE = [
  'usage: semtag next <version> [--major|--minor|--patch] [--pre]',
  '       semtag promote <candidate>',
  '       semtag parse <version>',
].join('\n');
const PARTS = ['--major', '--minor', '--patch'];

function next(input, flags) {
  const unknown = flags.filter((f) => !PARTS.includes(f) && f !== '--pre');
  if (unknown.length) throw new VersionError(`unknown option: ${unknown[0]}`);
  const parts = flags.filter((f) => PARTS.includes(f)).map((f) => f.slice(2));
  if (parts.length > 1) throw new VersionError('give at most one of --major, --minor, --patch');
  const version = parse(input);
  if (flags.includes('--pre')) return nextCandidate(version, parts[0] || 'patch');
  if (version.candidate) return promote(version);
  return bump(version, parts[0] || 'patch');
}

function run(argv, out = process.stdout) {
  const [command, input, ...flags] = argv;
  if (!command || !input) throw new VersionError(USAGE);
  if (command === 'parse') {
    out.write(JSON.stringify(parse(input)) + '\n');
  } else if (command === 'next') {
    out.write(`v${format(next(input, flags))}\n`);
  } else if (command === 'promote') {
    out.write(`v${format(promote(parse(input)))}\n`);
  } else {
    throw new VersionError(`unknown command: ${command}\n${USAGE}`);
  }
}

if (require.main === module) {
  try {
    run(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof VersionError)) throw error;
    process.stderr.write(`semtag: ${error.message}\n`);
    process.exit(2);
  }
}

module.exports = { run };
