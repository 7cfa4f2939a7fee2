// Fails when src/openapi.ts is not what the pinned openapi-typescript
// makes of api/openapi.yaml: the SDK's types must be the contract's.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "takeout-sdk-"));
try {
  const fresh = join(dir, "openapi.ts");
  execFileSync(join("node_modules", ".bin", "openapi-typescript"), [join("..", "..", "api", "openapi.yaml"), "--output", fresh], { stdio: ["ignore", "ignore", "inherit"] });
  if (readFileSync(fresh, "utf8") !== readFileSync(join("src", "openapi.ts"), "utf8")) {
    console.error("clients/miniprogram/src/openapi.ts is out of date with api/openapi.yaml: run `npm run generate` in clients/miniprogram");
    process.exit(1);
  }
  console.log("src/openapi.ts is up to date with api/openapi.yaml");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
