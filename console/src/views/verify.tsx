/**
 * Verify a journal: drop (or choose) exported journal files, and key files
 * if the signer is not known here; each journal is checked in this browser
 * with the same verifier as the run view (../carry.ts). Nothing is uploaded:
 * the files are read with the File API, and the only requests are for the
 * cell's published keys and, with edge.read, its registered edge devices.
 */
import { useState } from 'preact/hooks';
import { ADMIN, call } from '../api.ts';
import { can } from '../auth/session.ts';
import { parseFile, verifyCarried, type CarriedKey, type CarriedVerdict, type Parsed } from '../carry.ts';
import { useApp } from '../ui.tsx';
import { cellKeys } from '../verify.ts';

interface Checked {
  file: Extract<Parsed, { kind: 'journal' }>;
  result: CarriedVerdict | null;
  error: string | null;
}

export function VerifyView() {
  const { session } = useApp();
  const [checked, setChecked] = useState<Checked[]>([]);
  const [notes, setNotes] = useState<string[]>([]);
  const [over, setOver] = useState(false);
  const [busy, setBusy] = useState(false);

  const take = async (files: FileList | File[]) => {
    setBusy(true);
    const parsed: Parsed[] = [];
    for (const f of Array.from(files)) parsed.push(parseFile(f.name, await f.text()));
    const dropped: CarriedKey[] = parsed.flatMap((p) => (p.kind === 'keys' ? p.keys : []));
    const cell = await cellKeys().then(
      (k) => k.keys,
      () => new Map<string, JsonWebKey>(),
    );
    const devices = new Map<string, JsonWebKey>();
    if (can(session, 'edge.read')) {
      try {
        const r = await call<{ devices: { device_id: string; public_jwk: JsonWebKey }[] }>(
          session,
          'GET',
          // Deleted devices too: the journals they signed still verify with their keys.
          `${ADMIN}/edge/devices?limit=1000&include_deleted=true`,
        );
        for (const d of r.devices) devices.set(d.device_id, d.public_jwk);
      } catch {
        // no edge module here, or not allowed: dropped key files still work
      }
    }
    const out: Checked[] = [];
    for (const p of parsed) {
      if (p.kind !== 'journal') continue;
      try {
        out.push({ file: p, result: await verifyCarried(p, { cell, devices, dropped }), error: null });
      } catch (e) {
        out.push({ file: p, result: null, error: e instanceof Error ? e.message : String(e) });
      }
    }
    setNotes(
      parsed
        .map((p) =>
          p.kind === 'keys'
            ? `${p.name}: ${p.keys.length} key${p.keys.length === 1 ? '' : 's'}`
            : p.kind === 'unknown'
              ? `${p.name}: ${p.problem}`
              : '',
        )
        .filter(Boolean),
    );
    setChecked(out);
    setBusy(false);
  };

  return (
    <>
      <h1>Verify a journal</h1>
      <p>
        Drop a journal exported from a run (<strong>Download journal with keys</strong> on a run), a journal from the API, or a journal an
        edge device exported; add key files when its signer is not known to this cell. It is checked here, in this browser: nothing is
        uploaded.
      </p>
      <section
        class={`dropzone${over ? ' over' : ''}`}
        id="dropzone"
        aria-labelledby="dropzone-label"
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={(e) => {
          e.preventDefault();
          setOver(false);
          if (e.dataTransfer?.files.length) void take(e.dataTransfer.files);
        }}
      >
        <p id="dropzone-label">Drop journal and key files here, or</p>
        <label class="button-like">
          Choose files
          <input
            id="verify-files"
            class="sr-only"
            type="file"
            multiple
            accept=".json,.journal,.signed,application/json,text/plain"
            onChange={(e) => {
              const f = (e.target as HTMLInputElement).files;
              if (f?.length) void take(f);
            }}
          />
        </label>
      </section>
      {busy ? <p role="status">Verifying…</p> : null}
      {notes.length ? (
        <ul class="plain muted" id="verify-notes">
          {notes.map((n) => (
            <li>{n}</li>
          ))}
        </ul>
      ) : null}
      <div id="verify-results" aria-live="polite">
        {checked.map((c, i) => (
          <Result key={`${c.file.name}-${i}`} c={c} />
        ))}
      </div>
    </>
  );
}

function Result({ c }: { c: Checked }) {
  const v = c.result;
  return (
    <section class="panel verify-result" aria-label={`Verification of ${c.file.name}`} data-file={c.file.name}>
      <h2>
        {c.file.name}{' '}
        <span class="muted small">
          ({c.file.source === 'edge' ? 'edge export' : c.file.source === 'console' ? 'console export' : 'journal'})
        </span>
      </h2>
      {c.file.run_id ? (
        <p>
          Run <code>{c.file.run_id}</code>
        </p>
      ) : null}
      {c.error ? (
        <p class="verify verify-bad" data-verdict="bad" role="alert">
          Could not be checked: {c.error}
        </p>
      ) : v ? (
        v.verdict.ok ? (
          <p class="verify verify-ok carried-verdict" data-verdict="ok" role="status">
            <span aria-hidden="true">✔ </span>Verified in this browser: {v.count} records, the hash chain and every Ed25519 signature hold.
          </p>
        ) : (
          <p class="verify verify-bad carried-verdict" data-verdict="bad" data-seq={v.verdict.seq} role="alert">
            <span aria-hidden="true">✘ </span>Refused at record #{v.verdict.seq}: {v.verdict.reason}. Records from #{v.verdict.seq} on
            cannot be trusted.
          </p>
        )
      ) : null}
      {v && v.envelope !== null ? (
        <p class={v.envelope ? 'ok-text' : 'bad-text'} data-envelope={String(v.envelope)}>
          The device's signature over the export {v.envelope ? 'holds' : 'does NOT hold'}.
        </p>
      ) : null}
      {v ? (
        <ul class="plain signers">
          {v.signers.map((s) => (
            <li data-kid={s.kid} data-source={s.source ?? 'none'}>
              Signer <code title={s.kid}>{s.kid.slice(0, 16)}…</code>:{' '}
              {s.source === 'this cell'
                ? 'a key this cell publishes.'
                : s.source === 'edge device registered here'
                  ? 'an edge device registered on this cell.'
                  : s.source === 'a dropped key file'
                    ? 'a key from a file you dropped: trust it as far as you trust that file.'
                    : s.source === 'the file'
                      ? 'a key carried in the file only, unknown to this cell: the journal is intact, but this proves nothing of who wrote it.'
                      : 'no key for it: drop its key file.'}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}
