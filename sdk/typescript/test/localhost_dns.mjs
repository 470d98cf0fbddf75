// Test environment only: names under .localhost resolve to 127.0.0.1, as browsers resolve them
// (and as a deployment's wildcard DNS record for its preview domain would); glibc does not.
// Loaded into a test (import) or a child (node --import). Changes no SDK behaviour.
import dns from 'node:dns';

const lookup = dns.lookup;
dns.lookup = function lookupLocalhost(host, options, callback) {
  if (typeof options === 'function') {
    callback = options;
    options = {};
  }
  if (typeof host === 'string' && /\.localhost\.?$/i.test(host)) {
    if (typeof options === 'object' && options?.all) {
      process.nextTick(callback, null, [{ address: '127.0.0.1', family: 4 }]);
    } else {
      process.nextTick(callback, null, '127.0.0.1', 4);
    }
    return {};
  }
  return lookup.call(this, host, options, callback);
};
