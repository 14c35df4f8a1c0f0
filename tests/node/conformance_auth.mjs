// Preloaded (`node --import`) into the MCP conformance suite, which has no option for
// request headers: every HTTP request it makes carries `Authorization: Bearer
// $SHOAL_TOKEN`. Host and Origin stay as the suite sets them, so its DNS-rebinding
// scenario still tests the daemon's own checks.
import { getGlobalDispatcher, setGlobalDispatcher } from "undici";

const token = process.env.SHOAL_TOKEN;
const auth = `Bearer ${token}`;

function withAuth(headers) {
  if (headers == null) return { authorization: auth };
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) return [...headers, ["authorization", auth]];
    return [...headers, "authorization", auth];
  }
  if (typeof headers.entries === "function" && !(headers.constructor === Object)) {
    const o = {};
    for (const [k, v] of headers.entries()) o[k] = v;
    o.authorization = auth;
    return o;
  }
  return { ...headers, authorization: auth };
}

if (token) {
  setGlobalDispatcher(
    getGlobalDispatcher().compose((dispatch) => (opts, handler) =>
      dispatch({ ...opts, headers: withAuth(opts.headers) }, handler)),
  );
}
