// The OpenFeature evaluation suite's evaluations through Node's server SDK
// and OpenFeature's OFREP provider (ofrep_test.go, TestOFREPNode). It reads
// one request per line on stdin, {kind, flag, def, context}, and writes the
// SDK's evaluation details as one JSON line on stdout; OFREP_ENDPOINT is
// the OFREP server (a cuecast agent).
import readline from 'node:readline';
import { OpenFeature } from '@openfeature/server-sdk';
import { OFREPProvider } from '@openfeature/ofrep-provider';

await OpenFeature.setProviderAndWait(new OFREPProvider({ baseUrl: process.env.OFREP_ENDPOINT }));
const client = OpenFeature.getClient();
const method = {
  boolean: 'getBooleanDetails', string: 'getStringDetails',
  integer: 'getNumberDetails', float: 'getNumberDetails', object: 'getObjectDetails',
};
console.log(JSON.stringify({ ready: true }));
for await (const line of readline.createInterface({ input: process.stdin })) {
  const req = JSON.parse(line);
  const d = await client[method[req.kind]](req.flag, req.def, req.context);
  console.log(JSON.stringify({
    value: d.value, variant: d.variant, reason: d.reason,
    errorCode: d.errorCode, errorMessage: d.errorMessage, flagMetadata: d.flagMetadata,
  }));
}
