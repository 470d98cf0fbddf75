// The build berthd serves from its web_root: index.html and desktop.html (a shared desktop
// link's page, no session) (no-cache) and hashed files under
// /assets/ (cached for a year). No inline script anywhere: berthd's CSP allows only 'self'.
// Each asset also gets a gzip twin (NAME.gz) for a server that sends precompressed files.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, constants } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

function gzipTwins(outDir: string): Plugin {
  return {
    name: 'berth-gzip-twins',
    apply: 'build',
    closeBundle() {
      const dir = join(outDir, 'assets');
      for (const name of readdirSync(dir)) {
        if (!/\.(js|css|svg)$/.test(name)) continue;
        const data = readFileSync(join(dir, name));
        writeFileSync(join(dir, `${name}.gz`), gzipSync(data, { level: constants.Z_BEST_COMPRESSION }));
      }
    },
  };
}

export default defineConfig({
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  plugins: [gzipTwins('dist')],
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    target: 'es2020',
    // Inlining small assets as data: URIs would need a looser CSP (img-src data:).
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    rollupOptions: {
      input: { main: resolve(here, 'index.html'), desktop: resolve(here, 'desktop.html') },
    },
  },
  server: {
    // `npm run dev`: the API of a berthd on its default address, same origin for the cookie.
    proxy: {
      '/v1': { target: 'http://127.0.0.1:8420', ws: true, changeOrigin: false },
    },
  },
});
