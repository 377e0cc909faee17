/**
 * Entry point of the operator console: loads the configuration and renders the
 * application into `#app`. See docs/console.md for what the console does and
 * console/src/app.tsx for its shell.
 */
import { render } from 'preact';
import { Console } from './app.tsx';
import { loadConfig } from './config.ts';
import './styles.css';

const root = document.getElementById('app')!;
loadConfig().then(
  (config) => render(<Console config={config} />, root),
  (e: unknown) => {
    root.textContent = '';
    const p = document.createElement('p');
    p.className = 'error';
    p.setAttribute('role', 'alert');
    p.textContent = `The console cannot start: ${e instanceof Error ? e.message : String(e)}`;
    root.append(p);
  },
);
