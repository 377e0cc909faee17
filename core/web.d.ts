/**
 * The web platform core/ may use, and nothing else: WebCrypto (`crypto.subtle`,
 * `crypto.getRandomValues`), `TextEncoder`, `TextDecoder`, `URL`, `btoa`, a `Headers` reader,
 * and the JWK / CryptoKey shapes. Every runtime core runs in (Node, browsers,
 * workers, the edge binary) has them. core/ compiles with no DOM and no Node
 * types (core/tsconfig.json), so a stray `fetch`, `document`, `setTimeout`,
 * `process` or `node:` import fails to type-check. The rest of the project
 * compiles with the full DOM types, which declare the same names; this file is
 * excluded there (tsconfig.json).
 */

interface JsonWebKey {
  alg?: string;
  crv?: string;
  d?: string;
  e?: string;
  ext?: boolean;
  k?: string;
  key_ops?: string[];
  kty?: string;
  n?: string;
  use?: string;
  x?: string;
  y?: string;
}

interface CryptoKey {
  readonly algorithm: { name: string };
  readonly extractable: boolean;
  readonly type: 'public' | 'private' | 'secret';
  readonly usages: string[];
}

interface CryptoKeyPair {
  privateKey: CryptoKey;
  publicKey: CryptoKey;
}

type WebCryptoAlgorithm = string | { name: string; [k: string]: unknown };
type WebCryptoData = ArrayBuffer | ArrayBufferView<ArrayBuffer>;

interface SubtleCrypto {
  digest(algorithm: WebCryptoAlgorithm, data: WebCryptoData): Promise<ArrayBuffer>;
  generateKey(algorithm: WebCryptoAlgorithm, extractable: boolean, usages: string[]): Promise<CryptoKeyPair | CryptoKey>;
  exportKey(format: 'jwk', key: CryptoKey): Promise<JsonWebKey>;
  importKey(format: 'jwk', key: JsonWebKey, algorithm: WebCryptoAlgorithm, extractable: boolean, usages: string[]): Promise<CryptoKey>;
  sign(algorithm: WebCryptoAlgorithm, key: CryptoKey, data: WebCryptoData): Promise<ArrayBuffer>;
  verify(algorithm: WebCryptoAlgorithm, key: CryptoKey, signature: WebCryptoData, data: WebCryptoData): Promise<boolean>;
}

interface WebCrypto {
  readonly subtle: SubtleCrypto;
  getRandomValues<T extends ArrayBufferView>(array: T): T;
}

declare var crypto: WebCrypto;

declare class TextEncoder {
  encode(input?: string): Uint8Array<ArrayBuffer>;
}

declare class TextDecoder {
  constructor(label?: string, options?: { fatal?: boolean });
  decode(input?: Uint8Array): string;
}

declare class URL {
  constructor(url: string, base?: string);
  readonly hostname: string;
  readonly host: string;
  readonly href: string;
  readonly origin: string;
  readonly pathname: string;
  readonly port: string;
  readonly protocol: string;
  readonly search: string;
  readonly hash: string;
  readonly username: string;
  readonly password: string;
}

declare function btoa(data: string): string;

/** Read-only view of request headers, as core's request helpers need it. */
interface Headers {
  get(name: string): string | null;
}
