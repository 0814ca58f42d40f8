// Lays out the MCP Bundle of one platform, ready for `mcpb pack`: manifest.json (this folder's,
// with the tools the binary lists by default and the platform it runs on), the icon, and the
// binary under server/.
//
//   node stage.mjs PLATFORM BINARY TOOLS_JSON OUT_DIR
//
// PLATFORM is Node's `${process.platform}-${process.arch}` of the binary; TOOLS_JSON is what
// `aegis-gitea-mcp tools --json --flavor gitea` printed (the default toolset and the discovery
// tools). Forgejo lists nearly the same tools; the manifest says `tools_generated`, so a client
// takes the list the server gives it at run time as the truth.
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [platform, binary, toolsJson, out] = process.argv.slice(2);
if (!platform || !binary || !toolsJson || !out) {
  console.error("usage: stage.mjs PLATFORM BINARY TOOLS_JSON OUT_DIR");
  process.exit(2);
}
const os = platform.split("-")[0];
if (!["darwin", "linux", "win32"].includes(os)) {
  console.error(`stage.mjs: no bundle platform for ${platform}`);
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const manifest = JSON.parse(readFileSync(join(here, "manifest.json"), "utf8"));

// The first sentence of each description: the bundle's tool list is for a person deciding
// whether to install it, not for the model.
const firstSentence = (text) => {
  const end = text.search(/\.(\s|$)/);
  return end === -1 ? text : text.slice(0, end + 1);
};
const tools = JSON.parse(readFileSync(toolsJson, "utf8"));
manifest.tools = tools.map((t) => ({ name: t.name, description: firstSentence(t.description ?? "") }));
manifest.compatibility = { platforms: [os] };

const executable = os === "win32" ? "aegis-gitea-mcp.exe" : "aegis-gitea-mcp";
const entry = `server/${executable}`;
if (os === "win32") manifest.server.entry_point = entry;
mkdirSync(join(out, "server"), { recursive: true });
copyFileSync(binary, join(out, entry));
chmodSync(join(out, entry), 0o755);
copyFileSync(join(here, manifest.icon), join(out, manifest.icon));
for (const file of ["LICENSE-MIT", "LICENSE-APACHE"]) copyFileSync(join(here, "..", "..", file), join(out, file));
writeFileSync(join(out, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
