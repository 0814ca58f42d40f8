// Prints, as JSON, the server configuration an MCP client makes of an unpacked MCP Bundle:
// the official MCPB library's own `getMcpConfigForManifest` (the code Claude Desktop's loader
// shares), with `${__dirname}` the bundle's folder and USER_CONFIG_JSON the values a person
// entered. Prints `null` when the client would refuse to start it (a required value missing).
//
//   node mcpb_config.mjs MCPB_PACKAGE_DIR BUNDLE_DIR USER_CONFIG_JSON
import { readFileSync } from "node:fs";
import { join, sep } from "node:path";
import { pathToFileURL } from "node:url";

const [library, bundle, userConfig] = process.argv.slice(2);
const { getMcpConfigForManifest } = await import(pathToFileURL(join(library, "dist", "index.js")).href);
const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: bundle,
  systemDirs: { HOME: process.env.HOME ?? "/", DESKTOP: "", DOCUMENTS: "", DOWNLOADS: "" },
  userConfig: JSON.parse(userConfig),
  pathSeparator: sep,
});
console.log(JSON.stringify(config ?? null));
