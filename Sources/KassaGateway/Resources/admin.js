"use strict";
const admin = {
  socket: null, shown: new Set(), start: 0, previous: 0,
  token() { return document.getElementById("token").value; },
  message(text) { document.getElementById("message").textContent = text; },

  async get(path) {
    const response = await fetch(path, { headers: { Authorization: "Bearer " + this.token() } });
    const body = await response.json();
    if (!response.ok) { this.message(`${body.title}: ${body.detail || ""}`); return null; }
    this.message("");
    return body;
  },

  async find(all) {
    const params = new URLSearchParams();
    const value = document.getElementById("search").value.trim();
    if (!all && value) params.set(document.getElementById("field").value, value);
    const body = await this.get("/v1/admin/sessions?" + params);
    if (!body) return;
    const tbody = document.querySelector("#sessions tbody");
    tbody.textContent = "";
    for (const s of body.sessions) {
      const tr = this.row([s.created, s.id, s.state, s.payeeReference || "", s.msisdnSuffix ? "…" + s.msisdnSuffix : "", s.lastProblemType || ""]);
      tr.className = "session"; tr.dataset.session = s.id;
      tr.onclick = () => this.open(s.id);
      tbody.appendChild(tr);
    }
    if (body.sessions.length === 1) this.open(body.sessions[0].id);
  },

  async open(id) {
    const body = await this.get(`/v1/admin/sessions/${id}/timeline`);
    if (!body) return;
    document.querySelector("#timeline tbody").textContent = "";
    this.shown = new Set();
    this.start = body.events.length ? body.events[0].atMs : 0;
    this.previous = this.start;
    for (const e of body.events) this.add(e);
    document.getElementById("timelineTitle").textContent = `${id} (${body.session.state})`;
    this.follow(id);
  },

  follow(id) {
    if (this.socket) { this.socket.onclose = null; this.socket.close(); }
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(`${scheme}//${location.host}/v1/admin/stream?session=${id}&token=${encodeURIComponent(this.token())}`, "kassa.v1");
    this.socket = socket;
    socket.onopen = () => { document.getElementById("live").textContent = "● live"; };
    socket.onmessage = (m) => this.add(JSON.parse(m.data));
    socket.onclose = () => {
      document.getElementById("live").textContent = "";
      if (this.socket === socket) setTimeout(() => this.follow(id), 1000);
    };
  },

  add(e) {
    if (e.id == null || this.shown.has(e.id)) return;
    this.shown.add(e.id);
    if (!this.start) { this.start = e.atMs; this.previous = e.atMs; }
    const summary = document.createElement("td");
    summary.textContent = e.summary;
    if (e.data && Object.keys(e.data).length) {
      const details = document.createElement("details");
      const s = document.createElement("summary"); s.textContent = e.kind.startsWith("upstream.") ? "exchange" : "details";
      const pre = document.createElement("pre"); pre.textContent = JSON.stringify(e.data, null, 2);
      details.append(s, pre); summary.appendChild(details);
    }
    const tr = this.row([e.atMs - this.start, e.atMs - this.previous, e.kind + (e.seq ? ` #${e.seq}` : "")], ["num", "num"]);
    tr.appendChild(summary);
    for (const v of [e.status ?? "", e.durationMs ?? ""]) { const td = document.createElement("td"); td.className = "num"; td.textContent = v; tr.appendChild(td); }
    const problem = e.level === "error" || e.kind === "problem" || /ProblemOccurred$/.test(e.summary);
    tr.className = problem ? "problem" : (e.level === "warning" ? "warning" : "");
    tr.dataset.kind = e.kind; tr.dataset.summary = e.summary;
    this.previous = e.atMs;
    document.querySelector("#timeline tbody").appendChild(tr);
    if (e.kind === "state.transition" && e.data && e.data.to) {
      document.getElementById("timelineTitle").textContent = `${e.session} (${e.data.to})`;
    }
  },

  row(values, classes = []) {
    const tr = document.createElement("tr");
    values.forEach((v, i) => { const td = document.createElement("td"); td.textContent = v; if (classes[i]) td.className = classes[i]; tr.appendChild(td); });
    return tr;
  }
};
document.getElementById("find").onclick = () => admin.find(false);
document.getElementById("recent").onclick = () => admin.find(true);
document.getElementById("search").onkeydown = (e) => { if (e.key === "Enter") admin.find(false); };
window.kassaAdmin = admin;
