'use strict';

const PATTERN = /^v?(\d+)\.(\d+)\.(\d+)(?:-cand\.(\d+))?$/;

class VersionError extends Error {}

function parse(text) {
  const match = PATTERN.exec(String(text).trim());
  if (!match) throw new VersionError(`not a version: ${text}`);
  const [major, minor, patch] = match.slice(1, 4).map(Number);
  const version = { major, minor, patch };
  if (match[4] !== undefined) version.candidate = Number(match[4]);
  return version;
}

function format(version) {
  const base = `${version.major}.${version.minor}.${version.patch}`;
  return version.candidate ? `${base}-cand.${version.candidate}` : base;
}

function bump(version, part = 'patch') {
  const { major, minor, patch } = version;
  switch (part) {
    case 'major':
      return { major: major + 1, minor: 0, patch: 0 };
    case 'minor':
      return { major, minor: minor + 1, patch: 0 };
    case 'patch':
      return { major, minor, patch: patch + 1 };
    default:
      throw new VersionError(`unknown part: ${part}`);
  }
}

function nextCandidate(version, part = 'patch') {
  if (version.candidate) return { ...version, candidate: version.candidate + 1 };
  return { ...bump(version, part), candidate: 1 };
}

function promote(version) {
  if (!version.candidate) throw new VersionError(`${format(version)} is not a release candidate`);
  return { major: version.major, minor: version.minor, patch: version.patch };
}

function compare(a, b) {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch
    || (a.candidate || Infinity) - (b.candidate || Infinity);
}

module.exports = { parse, format, bump, nextCandidate, promote, compare, VersionError };
