#!/usr/bin/env node
// Runs the aegis-gitea-mcp binary of this platform with this process's arguments, environment
// and standard streams. The binary comes in one optional dependency per platform
// (aegis-gitea-mcp-linux-x64, ...), of which npm installs only the one whose `os`, `cpu` and
// `libc` match, so no install script and no download is needed. The standard streams are
// handed to the binary itself, not copied: an MCP session over stdio talks to it directly.
"use strict";

const { spawn } = require("node:child_process");

const platform = `${process.platform}-${process.arch}`;
const executable = process.platform === "win32" ? "aegis-gitea-mcp.exe" : "aegis-gitea-mcp";
const pkg = `aegis-gitea-mcp-${platform}`;

let binary;
try {
  binary = require.resolve(`${pkg}/bin/${executable}`);
} catch {
  const musl = process.platform === "linux" && !process.report?.getReport().header.glibcVersionRuntime;
  process.stderr.write(
    `aegis-gitea-mcp: no binary for ${platform}${musl ? " with musl" : ""}: the package ${pkg} is not ` +
      "installed. npm installs it with this one unless optional dependencies are left out " +
      "(--omit=optional); binaries exist for linux-x64 and linux-arm64 (glibc), darwin-x64, " +
      "darwin-arm64 and win32-x64. Elsewhere, build from source: cargo install --locked --git " +
      "https://github.com/aegis-mcp/aegis-gitea-mcp\n",
  );
  process.exit(2);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
// A client stops the server with a signal to this process: pass it on, and leave when the
// binary has drained and exited.
const signals = ["SIGINT", "SIGTERM", "SIGHUP"];
for (const signal of signals) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => {
  process.stderr.write(`aegis-gitea-mcp: cannot run ${binary}: ${error.message}\n`);
  process.exit(2);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // End the same way, so that the caller sees the signal, not a made-up status.
    for (const s of signals) process.removeAllListeners(s);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
