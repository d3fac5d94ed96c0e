// Reads a JSON array of Kubernetes objects on stdin and validates each
// against the API schema of its apiVersion and kind, offline: the schemas
// come with the npm package kubernetes-models (package.json here; installed
// by scripts/install-deps). Prints one line per object; exits 1 when any
// object fails (a wrong type, a missing required field, a bad enum value),
// 2 when an apiVersion/kind has no schema in the package.
import { readFileSync } from "node:fs";

const objects = JSON.parse(readFileSync(0, "utf8"));
let failed = 0;
for (const o of objects) {
  const slash = o.apiVersion.indexOf("/");
  const path = slash < 0 ? `v1/${o.kind}` : `${o.apiVersion}/${o.kind}`;
  let model;
  try {
    model = (await import(`kubernetes-models/${path}`))[o.kind];
  } catch (e) {
    console.log(`NO SCHEMA ${o.apiVersion} ${o.kind}: ${e.message}`);
    process.exit(2);
  }
  try {
    new model(o).validate();
    console.log(`ok   ${o.kind}/${o.metadata.name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${o.kind}/${o.metadata.name}: ${e.message}`);
  }
}
process.exit(failed ? 1 : 0);
