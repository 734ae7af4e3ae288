// A real OAuth 2.1 / OpenID authorization server for the end-to-end tests: npm oidc-provider on
// loopback, with dynamic client registration, resource indicators (RFC 8707), PKCE, refresh
// tokens, introspection and revocation. Its development login and consent pages are driven over
// HTTP by the tests. Configured by environment:
//   RESOURCE         the protected MCP server's URL (the only resource it issues tokens for)
//   TOKEN_FORMAT     jwt (RFC 9068 JWT access tokens) or opaque (for introspection)
//   ACCESS_TTL       access token lifetime in seconds
//   REGISTRATION     off: no dynamic client registration; the public native client
//                    `cli-client` is pre-registered with a loopback redirect (any port, RFC 8252)
// Prints "issuer <url>" on stdout once listening on 127.0.0.1 (an ephemeral port).
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';

const resource = process.env.RESOURCE;
const format = process.env.TOKEN_FORMAT || 'jwt';
const ttl = Number(process.env.ACCESS_TTL || '300');
const registration = process.env.REGISTRATION !== 'off';
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'e2e', use: 'sig', alg: 'RS256' };

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [
    // The resource server's own credentials, for introspection.
    { client_id: 'mcp-server', client_secret: 'mcp-server-secret', grant_types: [], response_types: [], redirect_uris: [] },
    // A command-line client registered out of band, for servers without registration.
    {
      client_id: 'cli-client',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: ['http://127.0.0.1/callback'],
    },
  ],
  scopes: ['openid', 'offline_access', 'mcp', 'admin'],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: registration },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
        return { scope: 'mcp admin', audience: resource, accessTokenTTL: ttl, accessTokenFormat: format };
      },
    },
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { AccessToken: ttl, ClientCredentials: ttl, RefreshToken: 3600 },
});
provider.on('server_error', (ctx, err) => console.error('server_error', err));
server.on('request', provider.callback());
console.log(`issuer ${issuer}`);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
