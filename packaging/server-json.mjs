// Writes the MCP registry entry of a release: packaging/server.json (the PyPI and npm packages,
// the remote form) plus one `mcpb` package for every bundle in DIST_DIR, named by the URL it
// will have among the release's files, with its SHA-256 (clients check it before they run it).
//
//   node server-json.mjs DIST_DIR
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [dist] = process.argv.slice(2);
if (!dist) {
  console.error("usage: server-json.mjs DIST_DIR");
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const server = JSON.parse(readFileSync(join(here, "server.json"), "utf8"));
const releases = `${server.repository.url}/releases/download/v${server.version}`;
const bundles = readdirSync(dist).filter((f) => f.endsWith(".mcpb")).sort();
if (bundles.length === 0) {
  console.error(`server-json.mjs: no .mcpb file in ${dist}`);
  process.exit(1);
}
for (const file of bundles) {
  server.packages.push({
    registryType: "mcpb",
    identifier: `${releases}/${file}`,
    version: server.version,
    fileSha256: createHash("sha256").update(readFileSync(join(dist, file))).digest("hex"),
    transport: { type: "stdio" },
  });
}
writeFileSync(join(dist, "server.json"), `${JSON.stringify(server, null, 2)}\n`);
