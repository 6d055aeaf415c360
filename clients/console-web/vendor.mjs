// Copies the console's browser libraries from node_modules (pinned by
// package-lock.json) into the Python package, where they ship and are
// committed: the console loads nothing from a CDN or any network at run time.
// `--check` compares instead of copying, and fails on any difference (CI).
import { readFileSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "..", "nexus_grpc", "console", "static", "vendor");
const FILES = [
  ["cytoscape/dist/cytoscape.min.js", "cytoscape.min.js"],
  ["cytoscape/LICENSE", "cytoscape.LICENSE.txt"],
];
const check = process.argv.includes("--check");
let stale = 0;
mkdirSync(out, { recursive: true });
for (const [from, to] of FILES) {
  const source = readFileSync(join(here, "node_modules", from));
  const target = join(out, to);
  if (check) {
    if (!existsSync(target) || !readFileSync(target).equals(source)) {
      console.error(`stale: nexus_grpc/console/static/vendor/${to} differs from ${from}; run make console-assets`);
      stale += 1;
    }
  } else {
    writeFileSync(target, source);
    console.log(`vendored ${from} -> nexus_grpc/console/static/vendor/${to}`);
  }
}
process.exit(stale ? 1 : 0);
