// Validates an OpenAPI document (a file) with @seriousme/openapi-schema-validator: the document
// against the OpenAPI 3.1 schema, and every $ref resolved. Run with the console's node_modules:
//   NODE_PATH=console/node_modules node tests/http/openapi_validate.mjs FILE
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(pathToFileURL(process.argv[3] + "/"));
const { Validator } = await import(pathToFileURL(require.resolve("@seriousme/openapi-schema-validator")).href);
const doc = JSON.parse(readFileSync(process.argv[2], "utf8"));
const validator = new Validator();
const result = await validator.validate(doc);
if (!result.valid) {
  console.log(JSON.stringify(result.errors, null, 2));
  process.exit(1);
}
console.log(`valid OpenAPI ${validator.version}: ${Object.keys(doc.paths).length} paths`);
