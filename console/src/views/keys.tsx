/**
 * API keys: the keys the session may see (its own, or everyone's with
 * iam.principals.read), mint (name, scopes, rpm ceiling, IP rule, expiry,
 * owner), rotate (the previous secret keeps working for the grace window) and
 * revoke. A new secret is shown once, in this view only, with a copy button;
 * leaving the view or dismissing it forgets it (the cell keeps only its hash).
 */
import { useState } from 'preact/hooks';
import { ADMIN, call, describeError, seg } from '../api.ts';
import { can } from '../auth/session.ts';
import { Confirm, CopyButton, ErrorNote, Section, StateBadge, Time, useApp, useLoad, Who } from '../ui.tsx';

interface Key {
  key_id: string;
  owner_id: string;
  name: string;
  status: string;
  scopes: string[];
  rate_limit_rpm: number | null;
  allowed_ips: string[];
  allowed_regions: string[];
  created_at: string;
  expires_at: string | null;
  rotated_at: string | null;
  previous_secret_valid_until: string | null;
  revoked_at: string | null;
}
interface Shown {
  keyId: string;
  name: string;
  secret: string;
  why: 'minted' | 'rotated';
  graceUntil: string | null;
}

const words = (s: string) =>
  s
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean);

function SecretOnce({ shown, onDismiss }: { shown: Shown; onDismiss(): void }) {
  return (
    <section class="secret-once" aria-labelledby="secret-title" id="secret-once">
      <h2 id="secret-title">
        {shown.why === 'minted' ? 'New key' : 'New secret'} for “<bdi>{shown.name}</bdi>”: copy it now
      </h2>
      <p>
        This secret is shown once. The cell stores only its SHA-256 hash and cannot show it again.
        {shown.why === 'rotated' && shown.graceUntil ? (
          <>
            {' '}
            The previous secret keeps working until <Time at={shown.graceUntil} />.
          </>
        ) : null}
      </p>
      <p>
        <label for="secret-value">Secret</label>
        <input
          id="secret-value"
          class="secret"
          type="text"
          readOnly
          value={shown.secret}
          onFocus={(e) => (e.target as HTMLInputElement).select()}
        />
        <CopyButton text={shown.secret} label={`Copy the secret of ${shown.name}`} />
      </p>
      <button type="button" id="secret-dismiss" onClick={onDismiss}>
        I have stored it: hide the secret
      </button>
    </section>
  );
}

function MintForm({ onMinted }: { onMinted(s: Shown): void }) {
  const { session } = useApp();
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState('');
  const [rpm, setRpm] = useState('');
  const [ips, setIps] = useState('');
  const [expires, setExpires] = useState('');
  const [owner, setOwner] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const body: Record<string, unknown> = { name: name.trim(), scopes: words(scopes) };
      if (rpm.trim()) body['rate_limit_rpm'] = Number(rpm);
      if (ips.trim()) body['allowed_ips'] = words(ips);
      if (expires) body['expires_at'] = new Date(expires).toISOString();
      if (owner.trim()) body['owner_id'] = owner.trim();
      const k = await call<Key & { secret: string }>(session, 'POST', `${ADMIN}/api-keys`, { body });
      onMinted({ keyId: k.key_id, name: k.name, secret: k.secret, why: 'minted', graceUntil: null });
      setName('');
      setScopes('');
      setRpm('');
      setIps('');
      setExpires('');
      setOwner('');
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="grid-form" id="mint-form" onSubmit={submit} aria-label="Mint an API key">
      <label for="mint-name">Name</label>
      <input id="mint-name" required maxLength={100} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      <label for="mint-scopes">
        Scopes <span class="muted">(space or comma separated; empty: the owner's full authority)</span>
      </label>
      <input
        id="mint-scopes"
        value={scopes}
        placeholder="system.orchestration.admin.read"
        onInput={(e) => setScopes((e.target as HTMLInputElement).value)}
      />
      <label for="mint-rpm">
        Requests per minute ceiling <span class="muted">(optional)</span>
      </label>
      <input id="mint-rpm" type="number" min={1} value={rpm} onInput={(e) => setRpm((e.target as HTMLInputElement).value)} />
      <label for="mint-ips">
        Allowed IPs or CIDR ranges <span class="muted">(optional)</span>
      </label>
      <input id="mint-ips" value={ips} placeholder="127.0.0.1 10.0.0.0/8" onInput={(e) => setIps((e.target as HTMLInputElement).value)} />
      <label for="mint-expires">
        Expires <span class="muted">(optional)</span>
      </label>
      <input id="mint-expires" type="datetime-local" value={expires} onInput={(e) => setExpires((e.target as HTMLInputElement).value)} />
      <label for="mint-owner">
        Owner principal id <span class="muted">(optional; default: you)</span>
      </label>
      <input id="mint-owner" value={owner} placeholder="svc_…" onInput={(e) => setOwner((e.target as HTMLInputElement).value)} />
      <div>
        <button type="submit" class="primary" id="mint-submit" disabled={busy || !name.trim()}>
          Mint key
        </button>
      </div>
      {error ? (
        <p class="error" role="alert" id="mint-error">
          {error}
        </p>
      ) : null}
    </form>
  );
}

function KeyActions({ k, onShown, onChanged }: { k: Key; onShown(s: Shown): void; onChanged(): void }) {
  const { session } = useApp();
  const [ask, setAsk] = useState<'rotate' | 'revoke' | null>(null);
  const [error, setError] = useState<string | null>(null);
  if (k.status !== 'active' || !can(session, 'iam.keys.write')) return <span class="muted">-</span>;
  const act = async (what: 'rotate' | 'revoke') => {
    setError(null);
    try {
      const r = await call<Key & { secret?: string }>(
        session,
        'POST',
        `${ADMIN}/api-keys/${seg(k.key_id)}/${what}`,
        what === 'rotate' ? { body: {} } : {},
      );
      if (what === 'rotate' && r.secret)
        onShown({ keyId: k.key_id, name: k.name, secret: r.secret, why: 'rotated', graceUntil: r.previous_secret_valid_until });
      setAsk(null);
      onChanged();
    } catch (e) {
      setError(describeError(e));
    }
  };
  return (
    <div class="buttons">
      {ask === null ? (
        <>
          <button type="button" class="small rotate" onClick={() => setAsk('rotate')} aria-label={`Rotate ${k.name}`}>
            Rotate
          </button>
          <button type="button" class="small danger revoke" onClick={() => setAsk('revoke')} aria-label={`Revoke ${k.name}`}>
            Revoke
          </button>
        </>
      ) : (
        <Confirm
          question={ask === 'rotate' ? 'Issue a new secret?' : 'Revoke: both secrets stop working now.'}
          act="Confirm"
          cls={ask === 'revoke' ? 'danger' : 'primary'}
          label={`Confirm ${ask} of ${k.name}`}
          small
          onConfirm={() => act(ask)}
          onKeep={() => setAsk(null)}
        />
      )}
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
    </div>
  );
}

export function KeysView() {
  const { session } = useApp();
  const [shown, setShown] = useState<Shown | null>(null);
  const keys = useLoad((signal) => call<{ keys: Key[] }>(session, 'GET', `${ADMIN}/api-keys?limit=1000`, { signal }), [session]);
  const show = (s: Shown) => {
    setShown(s);
    keys.reload();
  };
  return (
    <>
      <h1>API keys</h1>
      {shown ? <SecretOnce shown={shown} onDismiss={() => setShown(null)} /> : null}
      {can(session, 'iam.keys.write') ? (
        <Section title="Mint a key" id="mint">
          <MintForm onMinted={show} />
        </Section>
      ) : (
        <p class="muted">Your credential lacks iam.keys.write: you can list keys but not mint, rotate or revoke them.</p>
      )}
      <Section title="Keys" id="keys-list">
        <ErrorNote error={keys.error} prefix="Keys could not be loaded" />
        {keys.data ? (
          <div class="table-wrap">
            <table id="keys-table">
              <caption class="sr-only">API keys, oldest first</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Key id</th>
                  <th scope="col">Owner</th>
                  <th scope="col">Status</th>
                  <th scope="col">Scopes</th>
                  <th scope="col">Limits</th>
                  <th scope="col">Created</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {keys.data.keys.map((k) => (
                  <tr key={k.key_id} data-key={k.key_id} data-name={k.name} data-status={k.status}>
                    <th scope="row" data-label="Name">
                      <bdi>{k.name}</bdi>
                    </th>
                    <td data-label="Key id">
                      <code>{k.key_id}</code>
                    </td>
                    <td data-label="Owner">
                      <Who id={k.owner_id} />
                    </td>
                    <td data-label="Status">
                      <StateBadge state={k.status} />
                      {k.previous_secret_valid_until ? (
                        <div class="muted">
                          previous secret until <Time at={k.previous_secret_valid_until} />
                        </div>
                      ) : null}
                    </td>
                    <td data-label="Scopes">
                      {k.scopes.length ? (
                        k.scopes.map((s) => <code class="scope">{s}</code>)
                      ) : (
                        <span class="muted">owner's full authority</span>
                      )}
                    </td>
                    <td data-label="Limits">
                      {k.rate_limit_rpm ? `${k.rate_limit_rpm}/min` : ''}
                      {k.allowed_ips.length ? ` · ${k.allowed_ips.join(', ')}` : ''}
                      {k.expires_at ? (
                        <>
                          {' '}
                          · expires <Time at={k.expires_at} />
                        </>
                      ) : (
                        ''
                      )}
                    </td>
                    <td data-label="Created">
                      <Time at={k.created_at} />
                    </td>
                    <td data-label="Actions" class="row-actions">
                      <KeyActions k={k} onShown={show} onChanged={keys.reload} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : keys.loading ? (
          <p role="status">Loading keys…</p>
        ) : null}
      </Section>
    </>
  );
}
