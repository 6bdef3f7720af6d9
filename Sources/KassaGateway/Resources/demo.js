// The demo checkout, built on kassa.js as a merchant's page would be. Everything about the
// session (the stream, resuming after a drop, commands, 3-D Secure, the payment menu) is kassa.js;
// this file only draws it.
import { KassaSession, KassaOutcomeUnknownError, handleAppSwitch, handlePaymentMenu, handleThreeDSecure } from "/kassa.js";

const $ = (id) => document.getElementById(id);
const hide = (id, hidden) => $(id).classList.toggle("hidden", hidden);

/**
 * Stands in for the merchant's backend, which in a real shop does this on its server with its
 * API key and answers the page with {id, clientToken, streamUrl}. The demo does it here so it
 * needs nothing but Kassa.
 */
async function createSessionAsMerchantBackend(apiKey, amount, client) {
  const paymentOrder = {
    operation: "Purchase", currency: "SEK", amount, vatAmount: 0, description: "Kassa demo",
    userAgent: navigator.userAgent.slice(0, 200), language: "sv-SE",
    urls: { hostUrls: [location.origin], completeUrl: location.origin + "/demo/complete",
            cancelUrl: location.origin + "/demo/cancel", paymentUrl: location.origin + "/demo/" },
    payeeInfo: { payeeId: "kassa-demo", payeeName: "Kassa demo" }
  };
  const response = await fetch("/v1/sessions", {
    method: "POST", headers: { "Content-Type": "application/json", "Your-Api-Key": apiKey },
    body: JSON.stringify({ paymentOrder, client })
  });
  const body = await response.json();
  if (!response.ok) throw Object.assign(new Error(body.detail || body.title), { problem: body });
  return body;
}

/** What the payer's issuer sees of this browser: the page sends it to its backend, which passes it on at creation. */
function browserDevice() {
  return {
    platform: "web", userAgent: navigator.userAgent.slice(0, 512), language: navigator.language,
    screenHeight: screen.height, screenWidth: screen.width, screenColorDepth: screen.colorDepth,
    timeZoneOffset: -new Date().getTimezoneOffset()
  };
}

const demo = {
  session: null,
  detach: [],

  async create() {
    const amount = parseInt($("amount").value, 10) || 1500;
    let created;
    try {
      created = await createSessionAsMerchantBackend($("apiKey").value, amount, browserDevice());
    } catch (error) {
      this.log({ type: "error", data: error.problem || { detail: String(error) } }, true);
      return;
    }
    this.follow(created);
    $("state").textContent = created.state;
  },

  /** The page's part: it gets {id, clientToken, streamUrl} and nothing else. */
  follow({ id, clientToken, streamUrl }) {
    this.stop();
    const session = new KassaSession({ id, clientToken, streamUrl });
    this.session = session;
    session.on("connection", (change) => {
      $("connection").textContent = change.state;
      if (change.state === "connecting") {
        document.body.dataset.connections = String(Number(document.body.dataset.connections || 0) + 1);
      }
      if (change.state === "closed" && change.reason === "refused") this.log({ type: "stopped", data: change.problem }, true);
    });
    session.on("*", (event) => {
      this.log(event, event.type.endsWith("ProblemOccurred"));
      $("state").textContent = event.type;
    });
    session.on("PaymentSessionFetched", (event) => { this.showInstruments(event.data.availableInstruments); hide("abort", false); });
    // Offered only right after a retryable problem.
    session.on("*", (event) => hide("retry", !(event.type === "SdkProblemOccurred" && event.data.problem?.retryable)));
    session.on("SessionProblemOccurred", () => hide("launch", true));
    for (const end of ["PaymentSessionComplete", "PaymentSessionCanceled"]) {
      session.on(end, () => ["instrumentsBox", "abort", "launch"].forEach((id) => hide(id, true)));
    }
    // A desktop browser has no Swish app: show the link rather than navigate, and let the payer say it failed.
    this.detach.push(handleAppSwitch(session, {
      navigate: false,
      onLaunch: (url) => { $("launchLink").href = url; hide("launch", false); }
    }));
    this.detach.push(handleThreeDSecure(session, {
      methodFrame: $("methodFrame"), challengeFrame: $("challengeFrame"),
      onChallenge: (visible) => hide("challengeBox", !visible),
      onError: (error) => this.refused(error)
    }));
    // The payment menu is not a one-way door: the instruments above stay.
    this.detach.push(handlePaymentMenu(session, {
      frame: $("menuFrame"),
      onShow: (visible) => hide("menuBox", !visible),
      onMessage: ({ event }) => { document.body.dataset.menu = event; }
    }));
    session.connect();
  },

  stop() {
    this.detach.splice(0).forEach((off) => off());
    this.session?.close();
    this.session = null;
  },

  /// For tests and for trying it out: drop the connection as a flaky network would.
  dropConnection() { this.session?.reconnect(); },

  /** Sends a command; a refusal is shown, the answer itself is not news (the stream shows what follows). */
  run(command) {
    command?.catch((error) => this.refused(error));
  },

  refused(error) {
    if (error instanceof KassaOutcomeUnknownError) this.log({ type: "unknown", data: { detail: error.message } }, false);
    else this.log({ type: "refused", data: error.problem || { detail: error.message } }, true);
  },

  showInstruments(instruments) {
    const box = $("instruments");
    box.textContent = "";
    const session = this.session;
    for (const instrument of instruments) {
      if (instrument.type === "Swish") {
        const prefill = (instrument.prefills || [])[0];
        if (prefill && !$("msisdn").value) $("msisdn").value = prefill.msisdn;
        this.button(box, "Swish", () => {
          const msisdn = $("msisdn").value.trim();
          // With a number the payer confirms on their phone; without one, this device's app opens (LaunchClientApp).
          this.run(session.attempt(msisdn ? { type: "Swish", msisdn } : { type: "Swish" }));
        });
      } else if (instrument.type === "CreditCard") {
        for (const card of instrument.prefills || []) {
          this.button(box, `${card.cardBrand} ${card.maskedPan}`, () =>
            this.run(session.attempt({ type: "CreditCard", paymentToken: card.paymentToken })));
        }
      } else if (instrument.type === "WebBased") {
        this.button(box, instrument.paymentMethod, () =>
          this.run(session.fallback({ restrictToInstruments: [instrument.paymentMethod] })));
        // Instrument mode: Swedbank Pay's menu for this one method only.
        this.button(box, `${instrument.paymentMethod} only`, () =>
          this.run(session.fallback({ instrument: instrument.paymentMethod })));
      } else {
        this.button(box, instrument.type, () => this.run(session.attempt({ type: instrument.type })));
      }
    }
    // Every method in Swedbank Pay's own menu, web-based ones included.
    this.button(box, "More ways to pay", () => this.run(session.fallback()));
    hide("instrumentsBox", false);
  },

  button(parent, label, action) {
    const b = document.createElement("button");
    b.textContent = label; b.dataset.instrument = label;
    b.addEventListener("click", action);
    parent.appendChild(b);
  },

  log(event, problem) {
    const li = document.createElement("li");
    li.textContent = `${event.seq !== undefined ? "#" + event.seq + " " : ""}${event.type} ${JSON.stringify(event.data || {})}`;
    if (event.seq !== undefined) li.dataset.seq = event.seq;
    li.dataset.type = event.type;
    if (problem) li.className = "problem";
    $("events").appendChild(li);
  }
};

$("create").addEventListener("click", () => demo.create());
$("abort").addEventListener("click", () => demo.run(demo.session?.abort()));
$("retry").addEventListener("click", () => { hide("retry", true); demo.run(demo.session?.retry()); });
$("launchFailed").addEventListener("click", () => { hide("launch", true); demo.run(demo.session?.appLaunchFailed()); });
window.kassaDemo = demo;
