// A real OpenID Connect provider (node's oidc-provider, OpenID Certified) on loopback, for the
// gateway's [[auth.oidc]] tests: client-credentials grants whose access tokens are JWTs
// (RFC 9068, `typ: at+jwt`) for the audience `a2a-gateway`, signed with an ES256 key it can
// rotate on demand.
//
//   node oidc-provider.mjs <port>
//
// Prints `ready <issuer>` once it serves. Besides the provider's own routes:
//   POST /admin/rotate   publish a new signing key and withdraw the old one (answers the new kid)
//   GET  /admin/kid      the kid tokens are signed with now
// Client `orchestrator` / `orchestrator-secret` (client_secret_post) may ask for the scopes
// `a2a`, `a2a.read`, `a2a.send` and `a2a.short`; a token asked for with `a2a.short` lives 4 s
// (for streams that must end at `exp`), others 300 s. Every token also carries the claims
// a2a_agents ["*"] and a2a_can ["tasks", "streams"], which an [[auth.oidc]] issuer's tokens
// must not be granted anything by.
import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';

const port = Number(process.argv[2] || 0);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node oidc-provider.mjs <port>');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;
export const AUDIENCE = 'a2a-gateway';
const SCOPES = 'a2a a2a.read a2a.send a2a.short';

function signingKey() {
  const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: crypto.randomUUID(), alg: 'ES256', use: 'sig' };
}

function provider(key) {
  const p = new Provider(issuer, {
    clients: [
      {
        client_id: 'orchestrator',
        client_secret: 'orchestrator-secret',
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: 'client_secret_post',
        id_token_signed_response_alg: 'ES256',
        scope: SCOPES,
      },
    ],
    jwks: { keys: [key] },
    scopes: SCOPES.split(' '),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => 'urn:a2a-gateway',
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx) => ({
          scope: SCOPES,
          audience: AUDIENCE,
          accessTokenTTL: String(ctx.oidc.params.scope || '').split(' ').includes('a2a.short')
            ? 4
            : 300,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
    extraTokenClaims: () => ({ a2a_agents: ['*'], a2a_can: ['tasks', 'streams'] }),
  });
  p.on('server_error', (_ctx, err) => console.error('server_error', err));
  return p;
}

let key = signingKey();
let current = provider(key);

const server = http.createServer((req, res) => {
  if (req.url === '/admin/rotate' && req.method === 'POST') {
    key = signingKey();
    current = provider(key);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ kid: key.kid }));
    return;
  }
  if (req.url === '/admin/kid') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ kid: key.kid }));
    return;
  }
  current.callback()(req, res);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
process.on('SIGTERM', () => process.exit(0));
