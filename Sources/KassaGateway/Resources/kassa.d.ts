// Types of kassa.js, the browser client of a Kassa payment session (served at /kassa.js).
// The stream's events, commands and answers are those of README "### The stream".

// MARK: Problems

/** An RFC 7807 problem. Kassa's own types are URNs (`urn:kassa:problem:command-not-allowed`); upstream's are Swedbank Pay's URLs. */
export interface Problem {
  type: string;
  title?: string;
  status?: number;
  detail?: string;
  /** `urn:kassa:request:<id>`, the request's id in Kassa's event log. */
  instance?: string;
  /** The field a 400 is about. */
  parameter?: string;
  [member: string]: unknown;
}

/** A failed attempt as Swedbank Pay reported it (SessionProblemOccurred), e.g. `…/paymentorders/paymentattemptdeclined`. */
export interface UpstreamProblem {
  type: string;
  title?: string;
  status?: number;
  detail?: string;
}

/** The problems Kassa itself reports in SdkProblemOccurred, named as the Mobile SDKs name theirs. */
export type SdkProblem =
  /** A call to Swedbank Pay failed after its retries, or was refused (then with status and upstream): send retry, or attempt again. */
  | { type: "PaymentSessionAPIRequestFailed"; detail: string; operation: string; retryable: true; status?: number; upstream?: unknown }
  /** The client said the challenge could not be shown (threeDSecureLoadFailed): retry shows it again. */
  | { type: "PaymentSession3DSecureLoadFailed"; detail: string; retryable: true }
  /** Nothing can act on the session any more: it has ended. */
  | { type: "PaymentSessionEndReached"; detail: string; retryable: false }
  /** Swedbank Pay refused the abort; the session reads itself again and goes on. */
  | { type: "AbortPaymentNotAllowed"; detail: string; retryable: false };

export type SdkProblemType = SdkProblem["type"];

// MARK: Instruments

/** Prefills are Swedbank Pay's, passed on as they came (replayed events carry them redacted). */
export interface SwishPrefill { msisdn: string; rank?: number; [member: string]: unknown }

export interface SavedCard {
  paymentToken: string;
  cardBrand: string;
  maskedPan: string;
  expiryDate: string;
  rank?: number;
  [member: string]: unknown;
}

/** What PaymentSessionFetched offers. A wallet of another platform is WebBased: payable in the payment menu (`fallback`). */
export type AvailableInstrument =
  | { type: "Swish"; prefills: SwishPrefill[] }
  | { type: "CreditCard"; prefills: SavedCard[] }
  | { type: "NewCreditCard" }
  | { type: "ApplePay" }
  | { type: "GooglePay" }
  | { type: "WebBased"; paymentMethod: string };

/** What `attempt` pays with. Swish without `msisdn` starts the app on this device (LaunchClientApp). */
export type Instrument =
  | { type: "Swish"; msisdn?: string | null }
  | { type: "CreditCard"; paymentToken: string }
  | { type: "NewCreditCard"; enabledPaymentDetailsConsentCheckbox?: boolean }
  | { type: "ApplePay" }
  | { type: "GooglePay" };

// MARK: Events

/** A form to post into a frame: the 3-D Secure method step and challenge. */
export interface FormPost {
  url: string;
  method: string;
  form: Record<string, string>;
}

export interface ApplePayRequest {
  CurrencyCode?: string;
  Locale?: string;
  MerchantCapabilities?: string[];
  SupportedNetworks?: string[];
  TotalAmount?: string;
  TotalAmountLabel?: string;
  [member: string]: unknown;
}

export interface GooglePayRequest {
  AllowedCardAuthMethods?: string[];
  AllowedCardNetworks?: string[];
  CountryCode?: string;
  CurrencyCode?: string;
  EnvironmentNative?: string;
  Gateway?: string;
  GatewayMerchantId?: string;
  TotalPrice?: string;
  TotalPriceStatus?: string;
  [member: string]: unknown;
}

/** Each event's `data`, by its `type`. */
export interface KassaEventData {
  PaymentSessionFetched: { availableInstruments: AvailableInstrument[] };
  /** The app's URL (Swish: `swish://paymentrequest?token=…&callbackurl=…`). */
  LaunchClientApp: { url: string };
  /** Post `form` to `url` in a hidden frame; send `3dsMethod` when it loaded. Kassa goes on by itself after `timeoutMs`. */
  Run3DSecureMethod: FormPost & { timeoutMs: number };
  /** Open the wallet sheet with `request`; answer with `wallet`. */
  ShowWallet:
    | { paymentMethod: "ApplePay"; request: ApplePayRequest; merchantIdentifier?: string | null }
    | { paymentMethod: "GooglePay"; request: GooglePayRequest; merchantIdentifier?: string | null };
  /** Post the creq `form` to `url` in a visible frame; the issuer's page answers Kassa itself. */
  Show3DSecure: FormPost;
  Dismiss3DSecure: Record<string, never>;
  /** `url` is Swedbank Pay's view-payment script: frame `{baseUrl}/menu/?url=<url>` (handlePaymentMenu does). */
  ShowPaymentMenu: { url: string; restrictedToInstruments: string[] | null; instrumentMode: string | null };
  PaymentSessionComplete: Record<string, never>;
  PaymentSessionCanceled: Record<string, never>;
  /** A problem inside the payment session (a declined or cancelled attempt); a new attempt may follow. */
  SessionProblemOccurred: { problem: UpstreamProblem };
  /** `retryable` repeats the problem's own (AbortPaymentNotAllowed may lack it here). */
  SdkProblemOccurred: { problem: SdkProblem; retryable?: boolean };
}

export type KassaEventType = keyof KassaEventData;

/** One frame of the stream: numbered per session from 1 without gaps. */
export interface KassaEventOf<T extends KassaEventType> {
  seq: number;
  /** The session's id. */
  session: string;
  type: T;
  /** ISO 8601, when Kassa pushed it. */
  at: string;
  data: KassaEventData[T];
}

/** Every event, discriminated by `type`. */
export type KassaEvent = { [T in KassaEventType]: KassaEventOf<T> }[KassaEventType];

/** The events after which the session pushes nothing more (SdkProblemOccurred only with PaymentSessionEndReached). */
export type TerminalEvent =
  | KassaEventOf<"PaymentSessionComplete">
  | KassaEventOf<"PaymentSessionCanceled">
  | KassaEventOf<"SdkProblemOccurred">;

export declare function isTerminalEvent(event: KassaEvent): event is TerminalEvent;

// MARK: Commands and answers

/** The commands a client sends (without `id`: kassa.js numbers them). */
export type Command =
  | { type: "attempt"; instrument: Instrument }
  | { type: "abort" }
  | { type: "retry" }
  | { type: "fallback"; restrictToInstruments?: string[] | null }
  | { type: "fallback"; instrument: string }
  | { type: "wallet"; payload: string }
  | { type: "wallet"; canceled: true }
  | { type: "3dsMethod"; completed: boolean }
  | { type: "3ds"; cres: string }
  | { type: "3ds"; loadFailed: string }
  | { type: "appLaunchFailed" }
  | { type: "ping" };

export type CommandType = Command["type"];

type WithoutType<C> = C extends unknown ? Omit<C, "type"> : never;
/** What `send(type, body)` takes as `body` for a command type. */
export type CommandBody<T extends CommandType> = WithoutType<Extract<Command, { type: T }>>;

/** A command as it went on the wire. */
export type SentCommand = Command & { id: string };

/** A command's answer when it was taken. What it leads to arrives as events. */
export interface Answer {
  re: string;
  ok: true;
  /** "pong" for a ping. */
  type?: string;
}

/** A refusal as it comes on the wire; kassa.js turns it into a KassaCommandError. `re` is null for a problem with the stream itself. */
export interface Refusal {
  re: string | null;
  ok: false;
  problem: Problem;
}

// MARK: Errors

export declare class KassaError extends Error {
  /** The command as sent, or null. */
  readonly command: SentCommand | null;
  readonly problem: Problem | null;
}

/** The session refused the command (`ok: false`); nothing changed. `problem.type` says why, e.g. `urn:kassa:problem:command-not-allowed` (409). */
export declare class KassaCommandError extends KassaError {
  readonly command: SentCommand;
  readonly problem: Problem;
}

/** The connection dropped between sending the command and its answer: it may or may not have been carried out; the stream tells. */
export declare class KassaOutcomeUnknownError extends KassaError {
  readonly command: SentCommand;
}

/** The session had stopped (ended, refused, or closed): the command was never sent. */
export declare class KassaSessionClosedError extends KassaError {
  readonly command: SentCommand;
}

// MARK: The session

/** What the merchant's backend hands the page, from `POST /v1/sessions`'s answer. */
export interface SessionHandle {
  id: string;
  clientToken: string;
  streamUrl: string;
}

export interface KassaSessionOptions {
  /** Kassa's origin (and path prefix, if any). Default: this page's origin. */
  baseUrl?: string;
  /** The last seq this page already has (events after it are delivered). Default 0: all of them. */
  since?: number;
  /** Reconnect delays: initialMs doubling up to maxMs, each with 50–100 % jitter; back to initialMs after an open. Default 500 / 15000. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** A `ping` after this long without a frame; a connection silent for another interval is given up. Default 25000; 0: off. */
  heartbeatMs?: number;
  /** After a connection that never opened, ask `GET /v1/sessions/{id}` why (at most 5 s), and stop on 401 or 404; the next try waits for the answer. Default true. */
  checkOnFailedOpen?: boolean;
  /** The WebSocket constructor. Default: globalThis.WebSocket. */
  WebSocket?: new (url: string, protocols?: string | string[]) => WebSocket;
  /** The fetch for the check above. Default: globalThis.fetch. */
  fetch?: typeof fetch;
}

export type ConnectionState = "idle" | "connecting" | "open" | "reconnecting" | "closed";

/** Why a session stopped: it ended (a terminal event), was refused (401/404, 4401/4404), or close() was called. */
export interface ClosedInfo {
  reason: "ended" | "refused" | "client";
  /** The terminal event, for "ended". */
  event?: KassaEvent;
  /** The close code (4401, 4404) or HTTP status (401, 404) of a refusal. */
  code?: number;
  /** Why it was refused. */
  problem?: Problem | null;
}

export type ConnectionChange =
  | { state: "connecting"; attempt: number; since: number }
  | { state: "open"; since: number }
  | { state: "reconnecting"; attempt: number; delayMs: number; code?: number; reason?: string }
  | ({ state: "closed" } & ClosedInfo);

export declare const PROTOCOL: "kassa.v1";

export declare class KassaSession implements AsyncIterable<KassaEvent> {
  constructor(session: SessionHandle, options?: KassaSessionOptions);

  readonly id: string;
  readonly baseUrl: string;
  readonly streamUrl: string;
  /** The seq of the last event delivered; a reconnect asks for everything after it. */
  readonly lastSeq: number;
  readonly connectionState: ConnectionState;
  /** Resolves once the session has stopped for good. */
  readonly closed: Promise<ClosedInfo>;

  /** Starts following the stream (add handlers first). */
  connect(): this;
  /** Stops for good. */
  close(): void;
  /** Drops the connection and opens a new one at once, resuming with `since`. */
  reconnect(): void;

  on<T extends KassaEventType>(type: T, handler: (event: KassaEventOf<T>) => void): () => void;
  on(type: "*", handler: (event: KassaEvent) => void): () => void;
  on(type: "connection", handler: (change: ConnectionChange) => void): () => void;
  /** A problem that is neither an event nor a command's answer: why the stream was refused. */
  on(type: "problem", handler: (problem: Problem) => void): () => void;
  off(type: KassaEventType | "*" | "connection" | "problem", handler: (...args: any[]) => void): void;

  /** The events from now on; the iteration ends once the session has stopped. */
  events(): AsyncIterableIterator<KassaEvent>;
  [Symbol.asyncIterator](): AsyncIterableIterator<KassaEvent>;

  /** Sends a command; resolves with its answer, rejects with KassaCommandError, KassaOutcomeUnknownError or KassaSessionClosedError. */
  send<T extends CommandType>(type: T, ...body: {} extends CommandBody<T> ? [body?: CommandBody<T>] : [body: CommandBody<T>]): Promise<Answer>;
  attempt(instrument: Instrument): Promise<Answer>;
  abort(): Promise<Answer>;
  retry(): Promise<Answer>;
  fallback(options?: { restrictToInstruments?: string[] | null } | { instrument: string }): Promise<Answer>;
  wallet(result: string | { payload: string } | { canceled: true }): Promise<Answer>;
  cancelWallet(): Promise<Answer>;
  threeDSecureMethod(completed: boolean): Promise<Answer>;
  threeDSecure(cres: string): Promise<Answer>;
  threeDSecureLoadFailed(reason: string): Promise<Answer>;
  appLaunchFailed(): Promise<Answer>;
  ping(): Promise<Answer>;
}

// MARK: Browser helpers (each returns a function that detaches it)

export interface AppSwitchOptions {
  /** Navigate to the app's URL. Default true; false to show your own link instead. */
  navigate?: boolean;
  onLaunch?: (url: string, event: KassaEventOf<"LaunchClientApp">) => void;
  /** If the page is still visible this long after navigating, send `appLaunchFailed`. Default 0: never. */
  failAfterMs?: number;
  onError?: (error: unknown) => void;
}

export declare function handleAppSwitch(session: KassaSession, options?: AppSwitchOptions): () => void;

export interface ThreeDSecureOptions {
  /** The hidden frame for the method step. Default: one made (and removed) per step. */
  methodFrame?: HTMLIFrameElement;
  /** The visible frame for the challenge. Default: one made in `container`. */
  challengeFrame?: HTMLIFrameElement;
  /** Where frames are made. Default: document.body. */
  container?: HTMLElement;
  /** Show or hide the challenge yourself (with a frame you gave, only this is done). */
  onChallenge?: (visible: boolean, frame: HTMLIFrameElement) => void;
  /** A `3dsMethod` the session refused or could not get an answer to. */
  onError?: (error: unknown) => void;
}

export declare function handleThreeDSecure(session: KassaSession, options?: ThreeDSecureOptions): () => void;

/** What Kassa's menu host page (/menu/) reports. */
export interface MenuMessage {
  event: "loaded" | "paid" | "error" | "event";
  data: Record<string, unknown>;
}

export interface PaymentMenuOptions {
  frame?: HTMLIFrameElement;
  container?: HTMLElement;
  onShow?: (visible: boolean, frame: HTMLIFrameElement, event: KassaEvent) => void;
  onMessage?: (message: MenuMessage) => void;
}

export declare function handlePaymentMenu(session: KassaSession, options?: PaymentMenuOptions): () => void;

/** Posts `form` to `url` into `frame` (a form targeting the frame's name). */
export declare function postToFrame(frame: HTMLIFrameElement, post: { url: string; method?: string; form?: Record<string, string> }): void;
