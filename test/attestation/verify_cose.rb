# Verify a run's SCITT signed statement (COSE_Sign1) with Debian's ruby-cose, independently of the
# project's code: nothing of ours is loaded or run.
#
# Usage: ruby verify_cose.rb STATEMENT.cose CELL-KEYS.json
#   STATEMENT.cose  the COSE_Sign1 bytes (GET .../attestation?format=scitt)
#   CELL-KEYS.json  the cell's /.well-known/cell-keys.json (kid -> Ed25519 JWK)
# Exit 0 and print the subject when it verifies; exit 1 with the reason otherwise.
#
# ruby-cose 1.2 (Debian bookworm) parses COSE_Sign1, builds the Sig_structure and checks the kid, and
# registers ECDSA, RSA-PSS and HMAC only; EdDSA (alg -8, RFC 9053 section 2.2) is registered here over
# OpenSSL's Ed25519, the one primitive it lacks.
require "base64"
require "cose"
require "json"
require "openssl"

class EdDSAOverOpenSSL < COSE::Algorithm::Base
  ED25519_SPKI_PREFIX = ["302a300506032b6570032100"].pack("H*")

  def verify(key, signature, verification_data)
    pkey = OpenSSL::PKey.read(ED25519_SPKI_PREFIX + key.x)
    pkey.verify(nil, signature, verification_data) || raise(COSE::Error, "Signature verification failed")
  rescue OpenSSL::PKey::PKeyError => e
    raise(COSE::Error, "Signature verification failed: #{e.message}")
  end
end
COSE::Algorithm.register(EdDSAOverOpenSSL.new(-8, "EdDSA"))

def refuse(reason)
  puts "REFUSED: #{reason}"
  exit 1
end

begin
  bytes = File.binread(ARGV[0])
  published = JSON.parse(File.read(ARGV[1]))
  sign1 = COSE::Sign1.deserialize(bytes)
  headers = sign1.protected_headers
  refuse("alg is not EdDSA (-8)") unless headers[1] == -8
  kid = headers[4]
  refuse("no kid") unless kid.is_a?(String)
  entry = published["keys"].find { |k| k["kid"] == kid.dup.force_encoding("UTF-8") }
  refuse("no published key for kid #{kid}") unless entry
  x = Base64.urlsafe_decode64(entry["jwk"]["x"] + "=" * (-entry["jwk"]["x"].length % 4))
  key = COSE::Key::OKP.new(crv: 6, x: x, kid: kid)
  sign1.verify(key)
  cwt = headers[15]
  refuse("content type missing") unless headers[3].is_a?(String) || headers[3].is_a?(Integer)
  refuse("CWT claims need iss and sub") unless cwt.is_a?(Hash) && cwt[1].is_a?(String) && cwt[2].is_a?(String)
  statement = JSON.parse(sign1.payload)
  puts "VERIFIED #{cwt[2]} issued by #{cwt[1]} (#{headers[3]}, #{statement["predicateType"]})"
rescue COSE::Error, CBOR::MalformedFormatError, CBOR::UnpackError, EOFError, JSON::ParserError, ArgumentError, TypeError, NoMethodError => e
  refuse("#{e.class}: #{e.message}")
end
