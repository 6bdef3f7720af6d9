/// The gateway's own API description, served at `/openapi.yaml`. Kept in
/// code so the binary needs no resource files beside it.
enum OpenAPI {
    static let document = #"""
openapi: 3.0.3
info:
  title: Kassa
  version: 0.1.0
  description: |
    Kassa, a payment session gateway for Swedbank Pay. The Merchant Backend API
    follows the Swedbank Pay Mobile SDK's specification; every error is an
    RFC 7807 problem.
servers:
  - url: /
components:
  securitySchemes:
    merchantApiKey:
      type: apiKey
      in: header
      name: Your-Api-Key
    clientToken:
      type: http
      scheme: bearer
      description: the session's client token from POST /v1/sessions (or ?token= on the stream)
    adminToken:
      type: http
      scheme: bearer
      description: the admin token (--admin-token)
  schemas:
    Problem:
      type: object
      required: [type, title, status]
      properties:
        type: {type: string}
        title: {type: string}
        status: {type: integer}
        detail: {type: string}
        instance: {type: string}
        problems:
          type: array
          items:
            type: object
            properties:
              name: {type: string}
              description: {type: string}
      additionalProperties: true
    Operation:
      type: object
      required: [rel, href]
      properties:
        rel: {type: string}
        href: {type: string}
        method: {type: string}
        contentType: {type: string}
      additionalProperties: true
    Operations:
      type: array
      items: {$ref: '#/components/schemas/Operation'}
    ConsumersRequest:
      type: object
      required: [operation, language, shippingAddressRestrictedToCountryCodes]
      properties:
        operation: {type: string, example: initiate-consumer-session}
        language: {type: string, example: sv-SE}
        shippingAddressRestrictedToCountryCodes:
          type: array
          items: {type: string, example: SE}
    ConsumersResponse:
      type: object
      required: [operations]
      properties:
        token: {type: string}
        operations: {$ref: '#/components/schemas/Operations'}
    PaymentOrderRequest:
      type: object
      required: [paymentorder]
      properties:
        paymentorder:
          type: object
          required: [currency, amount, vatAmount, description, urls]
          properties:
            operation: {type: string, example: Purchase}
            currency: {type: string, example: SEK}
            amount: {type: integer, minimum: 0, example: 1500}
            vatAmount: {type: integer, minimum: 0, example: 375}
            description: {type: string, example: Test purchase}
            userAgent: {type: string}
            language: {type: string, example: sv-SE}
            instrument: {type: string}
            urls:
              type: object
              required: [hostUrls, completeUrl]
              properties:
                hostUrls: {type: array, items: {type: string}}
                completeUrl: {type: string}
                cancelUrl: {type: string}
                paymentUrl: {type: string}
                termsOfServiceUrl: {type: string}
            payeeInfo:
              type: object
              properties:
                payeeId: {type: string}
                payeeName: {type: string}
    PaymentOrderResponse:
      type: object
      required: [paymentorder, operations]
      properties:
        paymentorder:
          type: object
          required: [id]
          properties:
            id: {type: string}
          additionalProperties: true
        operations: {$ref: '#/components/schemas/Operations'}
        mobileSDK:
          type: object
          properties:
            validInstruments: {type: array, items: {type: string}}
            setInstrument: {type: string}
    SetInstrumentRequest:
      type: object
      required: [paymentorder]
      properties:
        paymentorder:
          type: object
          required: [operation, instrument]
          properties:
            operation: {type: string, enum: [SetInstrument]}
            instrument: {type: string, example: CreditCard}
    Instrument:
      type: object
      required: [type]
      properties:
        type: {type: string, enum: [Swish, CreditCard, NewCreditCard, ApplePay, GooglePay]}
        msisdn: {type: string, description: '+, country code and number, digits only (Swish on another device)'}
        paymentToken: {type: string, description: a saved card's token from the CreditCard prefills}
        enabledPaymentDetailsConsentCheckbox: {type: boolean}
    SessionCreated:
      type: object
      required: [id, clientToken, streamUrl, state]
      properties:
        id: {type: string}
        clientToken: {type: string}
        streamUrl: {type: string}
        state: {type: string}
    SessionSnapshot:
      type: object
      required: [id, state, seq]
      properties:
        id: {type: string}
        state: {type: string, enum: [starting, awaitingInstrument, attempting, threeDSecure, paymentMenu, failed, completed, canceled, ended]}
        seq: {type: integer}
        availableInstruments: {type: array, items: {type: object}}
        lastProblem: {nullable: true}
    CommandAccepted:
      type: object
      required: [ok, session]
      properties:
        ok: {type: boolean}
        session: {$ref: '#/components/schemas/SessionSnapshot'}
    Event:
      type: object
      required: [id, at, atMs, kind, level, summary]
      properties:
        id: {type: integer}
        at: {type: string, format: date-time}
        atMs: {type: integer}
        session: {type: string}
        seq: {type: integer}
        kind: {type: string, example: upstream.response}
        level: {type: string, enum: [debug, info, warning, error]}
        summary: {type: string}
        durationMs: {type: number}
        status: {type: integer}
        traceId: {type: string}
        data: {type: object, additionalProperties: true}
        sinceStartMs: {type: number}
        sincePreviousMs: {type: number}
    SessionRecord:
      type: object
      required: [id, state, created, updated]
      properties:
        id: {type: string}
        state: {type: string}
        payeeReference: {type: string, nullable: true}
        paymentOrder: {type: string, nullable: true}
        msisdnSuffix: {type: string, nullable: true}
        lastProblemType: {type: string, nullable: true}
        traceId: {type: string, nullable: true}
        created: {type: string, format: date-time}
        updated: {type: string, format: date-time}
  parameters:
    From: {name: from, in: query, required: false, description: ISO 8601 time or epoch milliseconds, schema: {type: string}}
    To: {name: to, in: query, required: false, description: ISO 8601 time or epoch milliseconds (after from), schema: {type: string}}
    SessionID:
      name: id
      in: path
      required: true
      schema: {type: string, pattern: '^[0-9a-f]{32}$'}
    IdempotencyKey:
      name: Idempotency-Key
      in: header
      required: false
      schema: {type: string, minLength: 1, maxLength: 200}
  responses:
    Accepted:
      description: The command was accepted; what it leads to arrives on the stream
      content:
        application/json:
          schema: {$ref: '#/components/schemas/CommandAccepted'}
    Problem:
      description: An RFC 7807 problem
      content:
        application/problem+json:
          schema: {$ref: '#/components/schemas/Problem'}
paths:
  /swedbank-pay-mobile/:
    get:
      summary: Merchant Backend root (links to the other endpoints)
      security: [{merchantApiKey: []}]
      responses:
        '200':
          description: Endpoint links
          content:
            application/json:
              schema:
                type: object
                required: [consumers, paymentorders]
                properties:
                  consumers: {type: string}
                  paymentorders: {type: string}
        '401': {$ref: '#/components/responses/Problem'}
  /swedbank-pay-mobile/consumers:
    post:
      summary: Start a consumer identification session (forwarded to POST /psp/consumers)
      security: [{merchantApiKey: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/ConsumersRequest'}
      responses:
        '200':
          description: Swedbank Pay's answer, forwarded
          content:
            application/json:
              schema: {$ref: '#/components/schemas/ConsumersResponse'}
        '400': {$ref: '#/components/responses/Problem'}
        '401': {$ref: '#/components/responses/Problem'}
        '413': {$ref: '#/components/responses/Problem'}
        '502': {$ref: '#/components/responses/Problem'}
        '504': {$ref: '#/components/responses/Problem'}
        default: {$ref: '#/components/responses/Problem'}
  /swedbank-pay-mobile/paymentorders:
    post:
      summary: Create a payment order (forwarded to POST /psp/paymentorders with Kassa's payee reference)
      security: [{merchantApiKey: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/PaymentOrderRequest'}
      responses:
        '201':
          description: Swedbank Pay's answer, forwarded (with mobileSDK in instrument mode)
          content:
            application/json:
              schema: {$ref: '#/components/schemas/PaymentOrderResponse'}
        '400': {$ref: '#/components/responses/Problem'}
        '401': {$ref: '#/components/responses/Problem'}
        '413': {$ref: '#/components/responses/Problem'}
        '502': {$ref: '#/components/responses/Problem'}
        '504': {$ref: '#/components/responses/Problem'}
        default: {$ref: '#/components/responses/Problem'}
  /swedbank-pay-mobile/paymentorders/{id}/setInstrument:
    patch:
      summary: Change the instrument of an instrument-mode payment order
      security: [{merchantApiKey: []}]
      parameters:
        - {name: id, in: path, required: true, description: the payee reference Kassa gave the order, schema: {type: string, pattern: '^[A-Za-z0-9]{1,30}$'}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/SetInstrumentRequest'}
      responses:
        '200':
          description: Swedbank Pay's answer, forwarded
          content:
            application/json:
              schema: {$ref: '#/components/schemas/PaymentOrderResponse'}
        '400': {$ref: '#/components/responses/Problem'}
        '401': {$ref: '#/components/responses/Problem'}
        '404': {$ref: '#/components/responses/Problem'}
        '502': {$ref: '#/components/responses/Problem'}
        '504': {$ref: '#/components/responses/Problem'}
        default: {$ref: '#/components/responses/Problem'}
  /swedbank-pay-mobile/sdk-callback/android-intent:
    get:
      summary: Android payment url helper (no authentication, no side effects)
      parameters:
        - {name: package, in: query, required: true, schema: {type: string, example: com.example.app}}
        - {name: id, in: query, required: false, schema: {type: string}}
      responses:
        '200':
          description: A page that redirects to the app's intent url
          content:
            text/html:
              schema: {type: string}
        '400': {$ref: '#/components/responses/Problem'}
  /swedbank-pay-mobile/sdk-callback/ios-universal-link:
    get:
      summary: iOS payment url helper (no authentication, no side effects)
      parameters:
        - {name: scheme, in: query, required: true, schema: {type: string, example: yourecomapp}}
        - {name: language, in: query, required: true, schema: {type: string, example: en-US}}
        - {name: app, in: query, required: false, schema: {type: string}}
        - {name: fallback, in: query, required: false, schema: {type: boolean}}
        - {name: id, in: query, required: false, schema: {type: string}}
      responses:
        '301':
          description: Redirect to the back-link page, or with fallback=true to the app's custom scheme
          headers:
            Location: {schema: {type: string}}
        '400': {$ref: '#/components/responses/Problem'}
  /.well-known/apple-app-site-association:
    get:
      summary: Apple app site association for the payment url helpers
      responses:
        '200':
          description: The association file
          content:
            application/json:
              schema:
                type: object
                required: [applinks]
                properties:
                  applinks: {type: object}
  /v1/sessions:
    post:
      summary: Create a PaymentSession from a view-paymentsession href or a new payment order
      security: [{merchantApiKey: []}]
      parameters: [{$ref: '#/components/parameters/IdempotencyKey'}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                viewPaymentSession: {type: string, description: an href on an allowed upstream host}
                paymentOrder: {$ref: '#/components/schemas/PaymentOrderRequest/properties/paymentorder'}
      responses:
        '201':
          description: The session; follow it on streamUrl with the clientToken
          content:
            application/json:
              schema: {$ref: '#/components/schemas/SessionCreated'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/sessions/{id}:
    get:
      summary: The session's state now
      security: [{clientToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}]
      responses:
        '200':
          description: Snapshot
          content:
            application/json:
              schema: {$ref: '#/components/schemas/SessionSnapshot'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/sessions/{id}/attempts:
    post:
      summary: Start a payment attempt with an instrument
      security: [{clientToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}, {$ref: '#/components/parameters/IdempotencyKey'}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [instrument]
              properties:
                instrument: {$ref: '#/components/schemas/Instrument'}
      responses:
        '202': {$ref: '#/components/responses/Accepted'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/sessions/{id}/abort:
    post:
      summary: Abort the payment (PaymentSessionCanceled follows)
      security: [{clientToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}, {$ref: '#/components/parameters/IdempotencyKey'}]
      responses:
        '202': {$ref: '#/components/responses/Accepted'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/sessions/{id}/retry:
    post:
      summary: Resume after SdkProblemOccurred with retryable true
      security: [{clientToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}, {$ref: '#/components/parameters/IdempotencyKey'}]
      responses:
        '202': {$ref: '#/components/responses/Accepted'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/sessions/{id}/fallback:
    post:
      summary: Open the web payment menu, optionally restricted to some payment methods
      security: [{clientToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}, {$ref: '#/components/parameters/IdempotencyKey'}]
      requestBody:
        required: false
        content:
          application/json:
            schema:
              type: object
              properties:
                restrictToInstruments: {type: array, items: {type: string}, maxItems: 20}
      responses:
        '202': {$ref: '#/components/responses/Accepted'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/sessions/{id}/3ds:
    post:
      summary: The 3-D Secure challenge's answer (cRes) from the client's web view
      security: [{clientToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}, {$ref: '#/components/parameters/IdempotencyKey'}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                cres: {type: string}
                loadFailed: {type: string, description: instead of cres, why the challenge could not be shown}
      responses:
        '202': {$ref: '#/components/responses/Accepted'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/sessions/{id}/app-launch-failed:
    post:
      summary: The client could not open the app of a LaunchClientApp
      security: [{clientToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}, {$ref: '#/components/parameters/IdempotencyKey'}]
      responses:
        '202': {$ref: '#/components/responses/Accepted'}
        default: {$ref: '#/components/responses/Problem'}
  /v1/admin/sessions:
    get:
      summary: Find sessions (support)
      security: [{adminToken: []}]
      parameters:
        - {name: id, in: query, required: false, schema: {type: string}}
        - {name: payeeReference, in: query, required: false, schema: {type: string}}
        - {name: paymentOrder, in: query, required: false, schema: {type: string}}
        - {name: msisdn, in: query, required: false, description: the last 4 or more digits, schema: {type: string}}
        - {name: state, in: query, required: false, schema: {type: string}}
        - {name: problemType, in: query, required: false, schema: {type: string}}
        - {$ref: '#/components/parameters/From'}
        - {$ref: '#/components/parameters/To'}
        - {name: cursor, in: query, required: false, schema: {type: string}}
        - {name: limit, in: query, required: false, schema: {type: integer, minimum: 1, maximum: 500}}
      responses:
        '200':
          description: Sessions, newest first
          content:
            application/json:
              schema:
                type: object
                required: [sessions, nextCursor]
                properties:
                  sessions: {type: array, items: {$ref: '#/components/schemas/SessionRecord'}}
                  nextCursor: {type: string, nullable: true}
        default: {$ref: '#/components/responses/Problem'}
  /v1/admin/events:
    get:
      summary: List events (support)
      security: [{adminToken: []}]
      parameters:
        - {name: session, in: query, required: false, schema: {type: string}}
        - {name: kind, in: query, required: false, description: comma-separated kinds, schema: {type: string}}
        - {name: level, in: query, required: false, description: this level and above, schema: {type: string, enum: [debug, info, warning, error]}}
        - {$ref: '#/components/parameters/From'}
        - {$ref: '#/components/parameters/To'}
        - {name: q, in: query, required: false, description: free text, schema: {type: string, maxLength: 200}}
        - {name: trace, in: query, required: false, schema: {type: string}}
        - {name: cursor, in: query, required: false, schema: {type: string}}
        - {name: limit, in: query, required: false, schema: {type: integer, minimum: 1, maximum: 1000}}
      responses:
        '200':
          description: Events in order
          content:
            application/json:
              schema:
                type: object
                required: [events, nextCursor]
                properties:
                  events: {type: array, items: {$ref: '#/components/schemas/Event'}}
                  nextCursor: {type: string, nullable: true}
        default: {$ref: '#/components/responses/Problem'}
  /v1/admin/sessions/{id}/timeline:
    get:
      summary: A session's timeline with the time between steps (support)
      security: [{adminToken: []}]
      parameters: [{$ref: '#/components/parameters/SessionID'}]
      responses:
        '200':
          description: The session and its events in time order
          content:
            application/json:
              schema:
                type: object
                required: [session, events, durationMs]
                properties:
                  session: {$ref: '#/components/schemas/SessionRecord'}
                  events: {type: array, items: {$ref: '#/components/schemas/Event'}}
                  durationMs: {type: number}
        default: {$ref: '#/components/responses/Problem'}
  /admin/:
    get:
      summary: The support page
      responses:
        '200':
          description: HTML
          content:
            text/html:
              schema: {type: string}
  /demo/:
    get:
      summary: The demo checkout page
      responses:
        '200':
          description: HTML
          content:
            text/html:
              schema: {type: string}
  /healthz:
    get:
      summary: Liveness
      responses:
        '200':
          description: The process answers
          content:
            application/json:
              schema: {type: object, properties: {status: {type: string}}}
  /readyz:
    get:
      summary: Readiness (store and upstream)
      responses:
        '200':
          description: Ready
          content:
            application/json:
              schema: {type: object, properties: {status: {type: string}}}
        '503': {$ref: '#/components/responses/Problem'}
  /openapi.yaml:
    get:
      summary: This document
      responses:
        '200':
          description: OpenAPI 3 description
          content:
            application/yaml:
              schema: {type: string}
"""#
}
