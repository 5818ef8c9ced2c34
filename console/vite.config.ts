// Builds the console into YARD_CONSOLE_OUT (scripts/build_console.sh sets it to
// $BUILD_DIR/console; the default is the repo's build/console), which yard-master serves at
// `/`. `npm run dev` proxies /api to a master (YARD_MASTER_URL, default the --dev address).
import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = process.env.YARD_CONSOLE_OUT ?? path.resolve(here, '../build/console');
const master = process.env.YARD_MASTER_URL ?? 'https://127.0.0.1:7780';

export default defineConfig({
  base: '/',
  plugins: [react()],
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2020',
    sourcemap: false,
    chunkSizeWarningLimit: 700,
  },
  worker: { format: 'es' },
  server: {
    host: '127.0.0.1',
    proxy: { '/api': { target: master, secure: false, changeOrigin: false } },
  },
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
  },
});
