// Margin's own requests, typed by the generated protocol (src/pure/protocol.generated.ts): the
// method's name picks the types of its params and result.

import type { CancellationToken } from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";
import type { Requests } from "./pure/protocol.generated";

export function request<M extends keyof Requests>(
  client: LanguageClient, method: M, params: Requests[M]["params"], token?: CancellationToken,
): Promise<Requests[M]["result"]> {
  // Without a token, none is passed: vscode-jsonrpc would send [params, null] for an undefined one.
  return token ? client.sendRequest<Requests[M]["result"]>(method, params, token)
    : client.sendRequest<Requests[M]["result"]>(method, params);
}
