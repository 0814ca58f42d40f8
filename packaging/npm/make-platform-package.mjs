// Writes the npm package that carries the binary for one platform: `aegis-gitea-mcp-<platform>`,
// with the `os`, `cpu` and `libc` that make npm install it only there, and the version,
// licence and repository of the main package (the one users name), so that the two can never
// disagree.
//
//   node make-platform-package.mjs PLATFORM BINARY OUT_DIR
//
// PLATFORM is one of the keys below (Node's `${process.platform}-${process.arch}`).
import { copyFileSync, chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PLATFORMS = {
  "linux-x64": { os: "linux", cpu: "x64", libc: "glibc" },
  "linux-arm64": { os: "linux", cpu: "arm64", libc: "glibc" },
  "darwin-x64": { os: "darwin", cpu: "x64" },
  "darwin-arm64": { os: "darwin", cpu: "arm64" },
  "win32-x64": { os: "win32", cpu: "x64" },
};

const [platform, binary, out] = process.argv.slice(2);
const target = PLATFORMS[platform];
if (!target || !binary || !out) {
  console.error(`usage: make-platform-package.mjs {${Object.keys(PLATFORMS).join(",")}} BINARY OUT_DIR`);
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const licences = ["LICENSE-MIT", "LICENSE-APACHE"];
const main = JSON.parse(readFileSync(join(here, "aegis-gitea-mcp", "package.json"), "utf8"));
const name = `${main.name}-${platform}`;
if (!(name in main.optionalDependencies) || main.optionalDependencies[name] !== main.version) {
  console.error(`${name}@${main.version} is not among the main package's optionalDependencies`);
  process.exit(1);
}
const executable = target.os === "win32" ? "aegis-gitea-mcp.exe" : "aegis-gitea-mcp";
mkdirSync(join(out, "bin"), { recursive: true });
copyFileSync(binary, join(out, "bin", executable));
for (const file of licences) copyFileSync(join(here, "..", "..", file), join(out, file));
chmodSync(join(out, "bin", executable), 0o755);
const manifest = {
  name,
  version: main.version,
  description: `The ${platform} binary of ${main.name}; install ${main.name}, which picks it.`,
  license: main.license,
  repository: main.repository,
  os: [target.os],
  cpu: [target.cpu],
  ...(target.libc ? { libc: [target.libc] } : {}),
  files: [`bin/${executable}`, ...licences],
  preferUnplugged: true,
};
writeFileSync(join(out, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
writeFileSync(
  join(out, "README.md"),
  `# ${name}\n\nThe ${platform} binary of [${main.name}](https://www.npmjs.com/package/${main.name}). ` +
    `Install \`${main.name}\` (\`npx -y ${main.name}\`), not this package: it picks the binary of the ` +
    "platform it runs on.\n",
);
