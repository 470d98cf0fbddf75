// The build berthd serves from its web_root: index.html (no-cache) and hashed files under
// /assets/ (cached for a year). No inline script anywhere: berthd's CSP allows only 'self'.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  resolve: { alias: { react: 'preact/compat', 'react-dom': 'preact/compat' } },
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    target: 'es2020',
    // Inlining small assets as data: URIs would need a looser CSP (img-src data:).
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    reportCompressedSize: true,
  },
  server: {
    // `npm run dev`: the API of a berthd on its default address, same origin for the cookie.
    proxy: {
      '/v1': { target: 'http://127.0.0.1:8420', ws: true, changeOrigin: false },
    },
  },
});
