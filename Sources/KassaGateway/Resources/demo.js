"use strict";
const demo = {
  session: null, socket: null, lastSeq: 0, ended: false, commandId: 0,

  async create() {
    const key = document.getElementById("apiKey").value;
    const amount = parseInt(document.getElementById("amount").value, 10) || 1500;
    const paymentOrder = {
      operation: "Purchase", currency: "SEK", amount, vatAmount: 0, description: "Kassa demo",
      userAgent: navigator.userAgent.slice(0, 200), language: "sv-SE",
      urls: { hostUrls: [location.origin], completeUrl: location.origin + "/demo/complete",
              cancelUrl: location.origin + "/demo/cancel", paymentUrl: location.origin + "/demo/" },
      payeeInfo: { payeeId: "kassa-demo", payeeName: "Kassa demo" }
    };
    // What the payer's issuer sees of this browser (the SDKs send the phone's own data).
    const client = {
      platform: "web", userAgent: navigator.userAgent.slice(0, 512), language: navigator.language,
      screenHeight: screen.height, screenWidth: screen.width, screenColorDepth: screen.colorDepth,
      timeZoneOffset: -new Date().getTimezoneOffset()
    };
    const response = await fetch("/v1/sessions", {
      method: "POST", headers: { "Content-Type": "application/json", "Your-Api-Key": key },
      body: JSON.stringify({ paymentOrder, client })
    });
    const body = await response.json();
    if (!response.ok) { this.log({ type: "error", data: body }, true); return; }
    this.session = body; this.lastSeq = 0; this.ended = false;
    document.getElementById("state").textContent = body.state;
    this.connect();
  },

  connect() {
    const s = this.session;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${scheme}//${location.host}${s.streamUrl}?since=${this.lastSeq}&token=${encodeURIComponent(s.clientToken)}`;
    const socket = new WebSocket(url, "kassa.v1");
    this.socket = socket;
    document.body.dataset.connections = String(Number(document.body.dataset.connections || 0) + 1);
    socket.onopen = () => { document.getElementById("connection").textContent = "open"; };
    socket.onmessage = (message) => this.receive(JSON.parse(message.data));
    socket.onclose = () => {
      document.getElementById("connection").textContent = "closed";
      // Resume where we left off: the gateway replays everything after lastSeq.
      if (!this.ended && this.socket === socket) setTimeout(() => this.connect(), 300);
    };
  },

  /// For tests and for trying it out: drop the connection as a flaky network would.
  dropConnection() { if (this.socket) this.socket.close(); },

  send(command) {
    command.id = "c" + (++this.commandId);
    this.socket.send(JSON.stringify(command));
  },

  receive(event) {
    if (event.re !== undefined) {
      if (!event.ok) this.log({ type: "refused", data: event.problem }, true);
      return;
    }
    if (event.seq !== this.lastSeq + 1) { this.log({ type: "gap", data: { expected: this.lastSeq + 1, got: event.seq } }, true); }
    this.lastSeq = event.seq;
    this.log(event, event.type.endsWith("ProblemOccurred"));
    const hide = (id, hidden) => document.getElementById(id).classList.toggle("hidden", hidden);
    switch (event.type) {
      case "PaymentSessionFetched": this.showInstruments(event.data.availableInstruments); hide("abort", false); break;
      case "LaunchClientApp": {
        const p = document.getElementById("launch");
        p.textContent = ""; const a = document.createElement("a"); a.href = event.data.url; a.textContent = "Open Swish";
        p.appendChild(a); hide("launch", false); break;
      }
      case "Run3DSecureMethod": {
        // The issuer's method page runs in a hidden frame; its load is the step's result.
        const frame = document.getElementById("methodFrame");
        frame.onload = () => { frame.onload = null; this.send({ type: "3dsMethod", completed: true }); };
        this.postToFrame("methodFrame", event.data);
        break;
      }
      case "Show3DSecure":
        // The issuer's challenge page, shown in a frame; it posts the cRes to Kassa by itself.
        hide("challengeBox", false);
        this.postToFrame("challengeFrame", event.data);
        break;
      case "Dismiss3DSecure": hide("challengeBox", true); break;
      case "ShowPaymentMenu":
        // The url is Swedbank Pay's script: Kassa's host page (/menu/) loads it and opens the menu.
        // The instruments stay: the payer may go back to one of them.
        hide("menuBox", false);
        document.getElementById("menuFrame").src = "/menu/?url=" + encodeURIComponent(event.data.url);
        break;
      case "PaymentSessionComplete": case "PaymentSessionCanceled":
        this.ended = true; hide("instrumentsBox", true); hide("abort", true); hide("launch", true); hide("menuBox", true);
        if (this.socket) this.socket.close();
        break;
    }
    document.getElementById("state").textContent = event.type;
  },

  /// Submits `form` to `url` with `method`, into the named frame: how a challenge or method page is opened.
  postToFrame(frameName, { url, method, form }) {
    const f = document.createElement("form");
    f.method = method || "POST"; f.action = url; f.target = frameName; f.className = "hidden";
    for (const [name, value] of Object.entries(form || {})) {
      const input = document.createElement("input");
      input.type = "hidden"; input.name = name; input.value = String(value);
      f.appendChild(input);
    }
    document.body.appendChild(f);
    f.submit();
    f.remove();
  },

  showInstruments(instruments) {
    const box = document.getElementById("instruments");
    box.textContent = "";
    for (const instrument of instruments) {
      if (instrument.type === "Swish") {
        const prefill = (instrument.prefills || [])[0];
        if (prefill && !document.getElementById("msisdn").value) document.getElementById("msisdn").value = prefill.msisdn;
        this.button(box, "Swish", () => {
          const msisdn = document.getElementById("msisdn").value.trim();
          this.send({ type: "attempt", instrument: msisdn ? { type: "Swish", msisdn } : { type: "Swish" } });
        });
      } else if (instrument.type === "CreditCard") {
        for (const card of instrument.prefills || []) {
          this.button(box, `${card.cardBrand} ${card.maskedPan}`, () =>
            this.send({ type: "attempt", instrument: { type: "CreditCard", paymentToken: card.paymentToken } }));
        }
      } else if (instrument.type === "WebBased") {
        this.button(box, instrument.paymentMethod, () =>
          this.send({ type: "fallback", restrictToInstruments: [instrument.paymentMethod] }));
        // Instrument mode: Swedbank Pay's menu for this one method only.
        this.button(box, `${instrument.paymentMethod} only`, () =>
          this.send({ type: "fallback", instrument: instrument.paymentMethod }));
      } else {
        this.button(box, instrument.type, () => this.send({ type: "attempt", instrument: { type: instrument.type } }));
      }
    }
    // Every method in Swedbank Pay's own menu, web-based ones included.
    this.button(box, "More ways to pay", () => this.send({ type: "fallback" }));
    document.getElementById("instrumentsBox").classList.remove("hidden");
  },

  button(parent, label, action) {
    const b = document.createElement("button");
    b.textContent = label; b.dataset.instrument = label; b.onclick = action;
    parent.appendChild(b);
  },

  log(event, problem) {
    const li = document.createElement("li");
    li.textContent = `${event.seq !== undefined ? "#" + event.seq + " " : ""}${event.type} ${JSON.stringify(event.data || {})}`;
    if (event.seq !== undefined) li.dataset.seq = event.seq;
    li.dataset.type = event.type;
    if (problem) li.className = "problem";
    document.getElementById("events").appendChild(li);
  }
};
document.getElementById("create").onclick = () => demo.create();
// What the menu's host page reports (loaded, paid, aborted, error).
window.addEventListener("message", (message) => {
  if (message.origin === location.origin && message.data && message.data.source === "kassa-menu") {
    document.body.dataset.menu = message.data.event;
  }
});
document.getElementById("abort").onclick = () => demo.send({ type: "abort" });
window.kassaDemo = demo;
