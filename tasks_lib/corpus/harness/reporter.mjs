// Runner-owned node:test reporter for the post-turn harness: one JSON line per finished test.
export default async function* reporter(source) {
  for await (const event of source) {
    if (event.type === 'test:pass' || event.type === 'test:fail') {
      const skipped = event.data.skip !== undefined || event.data.todo !== undefined;
      const outcome = event.type === 'test:pass' ? (skipped ? 'skip' : 'pass') : 'fail';
      yield JSON.stringify({ name: event.data.name, nesting: event.data.nesting, outcome }) + '\n';
    }
  }
}
