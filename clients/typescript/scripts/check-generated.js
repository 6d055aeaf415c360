// Regenerates src/gen/ from proto/ into a scratch directory and fails when the
// committed code differs, as `make proto-check` does for the Python stubs.
"use strict";
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const committed = path.join(root, "src", "gen");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "nexus-ts-gen-"));

function files(dir, base = dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? files(full, base) : [path.relative(base, full)];
  });
}

try {
  const buf = path.join(root, "node_modules", ".bin", "buf");
  execFileSync(buf, ["generate", "--output", scratch], { cwd: root, stdio: "inherit" });
  const fresh = path.join(scratch, "src", "gen");
  const names = new Set([...files(fresh), ...files(committed)]);
  const stale = [...names].sort().filter((name) => {
    const a = path.join(fresh, name);
    const b = path.join(committed, name);
    return !fs.existsSync(a) || !fs.existsSync(b) || !fs.readFileSync(a).equals(fs.readFileSync(b));
  });
  if (stale.length) {
    console.error("clients/typescript/src/gen differs from proto/; run `make proto`:");
    for (const name of stale) console.error(`  ${name}`);
    process.exitCode = 1;
  } else {
    console.log("TypeScript generated code matches proto/");
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
