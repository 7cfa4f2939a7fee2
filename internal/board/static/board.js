// The order board: log in, load the open orders, follow the merchant's
// live order stream (Server-Sent Events read through fetch, so the staff
// token goes in a header, never in a URL), act with one tap. It speaks
// Simplified Chinese, or English by choice: every word it shows is in
// strings.json, and times are the merchant's clock.
'use strict';

const pickup = (o) => o.fulfilment === 'pickup';
// A scheduled order waits in its own column, by slot, until it is ready.
const COLUMNS = [
  { key: 'new', show: (o) => o.status === 'PAID' },
  { key: 'accepted', show: (o) => o.status === 'ACCEPTED' && !o.slot },
  { key: 'scheduled', show: (o) => o.status === 'ACCEPTED' && !!o.slot },
  { key: 'ready', show: (o) => o.status === 'READY' && !pickup(o) },
  { key: 'pickup', show: (o) => o.status === 'READY' && pickup(o) },
  { key: 'delivering', show: (o) => o.status === 'DELIVERING' },
  { key: 'done', show: (o) => ['COMPLETED', 'CANCELLED', 'REFUNDING', 'REFUNDED'].includes(o.status) },
];
// actions are the taps an order offers: a delivery order is dispatched,
// a pickup order collected once ready.
function actions(o) {
  switch (o.status) {
    case 'PAID': return ['accept', 'reject'];
    case 'ACCEPTED': return pickup(o) ? ['ready'] : ['ready', 'dispatch'];
    case 'READY': return pickup(o) ? ['pick-up'] : ['dispatch'];
    case 'DELIVERING': return ['complete'];
    default: return [];
  }
}
// How long the open orders are looked back for: a scheduled order may
// have been placed days before its slot.
const OPEN_DAYS = 8;
// In the last minute before a paid order's accept deadline its card turns
// urgent and the board rings louder, again every URGENT_RING_MS while any
// order is urgent.
const URGENT_MS = 60 * 1000;
const URGENT_RING_MS = 15 * 1000;

const $ = (sel) => document.querySelector(sel);

// The language: zh-CN unless chosen otherwise (?lang=en, or the switch,
// remembered on this device).
let strings = {};
let lang = new URLSearchParams(location.search).get('lang') || localStorage.getItem('takeout.lang') || 'zh-CN';
// t is the text of key in the board's language, its {names} filled in.
function t(key, vars) {
  const text = strings[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (m, name) => (vars && name in vars ? String(vars[name]) : m));
}

async function loadStrings() {
  const all = await (await fetch('strings.json', { cache: 'no-cache' })).json();
  if (!all[lang]) lang = 'zh-CN';
  strings = all[lang];
  document.documentElement.lang = lang;
  document.title = t('title');
  for (const el of document.querySelectorAll('[data-text]')) el.textContent = t(el.dataset.text);
}

async function switchLanguage() {
  lang = lang === 'zh-CN' ? 'en' : 'zh-CN';
  localStorage.setItem('takeout.lang', lang);
  await loadStrings();
  if (session.token) {
    $('#who').textContent = t('who', { user: session.username, merchant: session.merchantId });
    setLive($('#live').classList.contains('on'));
    render();
    renderFailedDeliveries();
    loadLatePrints();
  }
}

// The merchant's clock: its time zone (Asia/Shanghai until read).
let timeZone = 'Asia/Shanghai';
const clockFormat = () => new Intl.DateTimeFormat(lang, { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const dayFormat = () => new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
const clock = (iso) => clockFormat().format(new Date(iso));
// when is a time of day, with its date when it is not today's.
function when(iso) {
  const d = new Date(iso);
  if (dayFormat().format(d) === dayFormat().format(new Date(serverNow()))) return clock(iso);
  return `${new Intl.DateTimeFormat(lang, { timeZone, month: 'numeric', day: 'numeric' }).format(d)} ${clock(iso)}`;
}
// midnight is the start of the merchant's day, as an instant.
function midnight() {
  const now = new Date(serverNow());
  const p = Object.fromEntries(new Intl.DateTimeFormat('en-CA', {
    timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
  }).formatToParts(now).map((x) => [x.type, x.value]));
  const wall = Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour, +p.minute, +p.second);
  const offset = wall - Math.floor(now.getTime() / 1000) * 1000;
  return new Date(Date.UTC(+p.year, +p.month - 1, +p.day) - offset);
}

async function loadTimeZone() {
  try {
    const res = await fetch(`/v1/merchants/${session.merchantId}/menu`);
    if (res.ok) timeZone = (await res.json()).merchant.time_zone || timeZone;
  } catch { /* the default clock */ }
}
const session = {
  get token() { return sessionStorage.getItem('takeout.token'); },
  get merchantId() { return sessionStorage.getItem('takeout.merchant'); },
  get username() { return sessionStorage.getItem('takeout.username'); },
  save(s) {
    sessionStorage.setItem('takeout.token', s.token);
    sessionStorage.setItem('takeout.merchant', s.merchant_id);
    sessionStorage.setItem('takeout.username', s.username);
  },
  clear() { sessionStorage.clear(); },
};

const orders = new Map(); // id → order
// deliveries holds each order's latest courier delivery (its highest
// attempt, newest change): from the list at start, then the stream.
const deliveries = new Map(); // order id → delivery
const fresh = new Set(); // ids of orders that just arrived
const notes = new Map(); // id → { text, error } shown on the card
let lastEventId = null;
let streamAbort = null;
let audio = null;
let ticker = null;
const escalated = new Set(); // ids of orders whose urgent ring has sounded
let lastUrgentRing = 0;
// clockSkew is the service's clock less this device's, read from the
// API's Date header (to the second) when the two differ by more than a
// couple of seconds: countdowns are to the service's deadlines.
let clockSkew = 0;
const serverNow = () => Date.now() + clockSkew;

function noteServerTime(res) {
  const at = Date.parse(res.headers.get('Date') || '');
  if (Number.isNaN(at)) return;
  const skew = at - Date.now();
  clockSkew = Math.abs(skew) > 2000 ? skew : 0;
}

// problemText is what the API said went wrong (RFC 9457): in the board's
// words for the problems staff meet, else the API's detail.
async function problemText(res, action) {
  try {
    const p = await res.json();
    const type = (p.type || '').split('/').pop();
    if (type === 'order-status-conflict' && p.fulfilment) return t(p.fulfilment === 'pickup' ? 'problem.pickup-order' : 'problem.delivery-order');
    if (type === 'order-status-conflict' && p.current_status) {
      return t('problem.order-status-conflict', { action: t(`action.${action}`), status: t(`status.${p.current_status}`) });
    }
    if (strings[`problem.${type}`]) return t(`problem.${type}`);
    return p.detail || p.title || `HTTP ${res.status}`;
  } catch {
    return `HTTP ${res.status}`;
  }
}

async function request(method, path, body, extraHeaders) {
  const headers = { Authorization: `Bearer ${session.token}`, ...(extraHeaders || {}) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  noteServerTime(res);
  if (res.status === 401) {
    sessionEnded(t('session.ended'));
    throw new Error('session ended');
  }
  return res;
}

function showLogin(message) {
  $('#board-view').hidden = true;
  $('#login-view').hidden = false;
  const err = $('#login-error');
  err.textContent = message || '';
  err.hidden = !message;
  $('#username').focus();
}

function sessionEnded(message) {
  if (streamAbort) streamAbort.abort();
  if (ticker) clearInterval(ticker);
  ticker = null;
  if (printsTimer) clearInterval(printsTimer);
  printsTimer = null;
  session.clear();
  orders.clear();
  deliveries.clear();
  showLogin(message);
}

$('#login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  // A user gesture: the sound of new orders may start from here on.
  audio = audio || new (window.AudioContext || window.webkitAudioContext)();
  const button = $('#login-button');
  button.disabled = true;
  try {
    const res = await fetch('/admin/v1/auth/login', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: $('#username').value.trim(), password: $('#password').value }),
    });
    if (!res.ok) {
      showLogin(await problemText(res));
      return;
    }
    session.save(await res.json());
    $('#password').value = '';
    start();
  } catch (err) {
    showLogin(t('error.reach', { message: err.message }));
  } finally {
    button.disabled = false;
  }
});

$('#logout').addEventListener('click', async () => {
  try { await request('POST', '/admin/v1/auth/logout'); } catch { /* leaving anyway */ }
  sessionEnded(t('session.out'));
});
for (const b of document.querySelectorAll('.lang')) b.addEventListener('click', switchLanguage);

function boardError(message) {
  const el = $('#board-error');
  el.textContent = message || '';
  el.hidden = !message;
}

async function start() {
  $('#login-view').hidden = true;
  $('#board-view').hidden = false;
  $('#who').textContent = t('who', { user: session.username, merchant: session.merchantId });
  render();
  await loadTimeZone();
  await loadToday();
  if (!ticker) ticker = setInterval(tick, 1000);
  await loadDeliveries();
  stream();
  loadLatePrints();
  loadAfterSales();
  if (!printsTimer) printsTimer = setInterval(() => { loadLatePrints(); loadAfterSales(); }, PRINTS_EVERY_MS);
}

// After-sales requests waiting for the merchant (by their deadline, else
// agreed for it) and those a customer took to the platform (the merchant
// may still concede); asked again with the late tickets.
const afterSaleNotes = new Map(); // id → { text, error }
async function loadAfterSales() {
  if (!session.token) return;
  try {
    const lists = await Promise.all(['requested', 'escalated'].map(async (status) => {
      const res = await request('GET', `/admin/v1/after-sales?status=${status}`);
      return res.ok ? (await res.json()).after_sales : [];
    }));
    renderAfterSales(lists.flat());
  } catch { /* the next round asks again */ }
}

function afterSaleWhat(a) {
  if (a.amount_fen !== null) return t('aftersales.amount', { amount: yuan(a.amount_fen) });
  return t('aftersales.units', { n: a.lines.reduce((n, l) => n + l.qty, 0) });
}

function renderAfterSales(list) {
  const ul = $('#after-sales-list');
  ul.replaceChildren();
  for (const a of list) {
    const li = document.createElement('li');
    li.dataset.afterSale = a.id;
    li.dataset.status = a.status;
    const what = document.createElement('p');
    what.className = 'what';
    what.textContent = t('aftersales.line', { order: a.order_id.slice(-6), what: afterSaleWhat(a), reason: a.reason });
    const by = document.createElement('p');
    by.className = 'by';
    by.textContent = a.status === 'escalated' ? t('aftersales.escalated', { why: a.escalation }) : t('aftersales.by', { time: when(a.respond_by) });
    li.append(what, by);
    a.photos.forEach((url, i) => {
      const link = document.createElement('a');
      link.href = url;
      link.target = '_blank';
      link.rel = 'noopener noreferrer';
      link.textContent = t('aftersales.photo', { n: i + 1 });
      li.append(link, ' ');
    });
    const agree = document.createElement('button');
    agree.className = 'agree';
    agree.textContent = t('aftersales.agree');
    agree.addEventListener('click', () => decideAfterSale(a.id, 'agree', li));
    li.append(agree);
    if (a.status === 'requested') {
      const note = document.createElement('input');
      note.className = 'note';
      note.maxLength = 200;
      note.placeholder = t('aftersales.note');
      const reject = document.createElement('button');
      reject.className = 'reject';
      reject.textContent = t('aftersales.reject');
      reject.addEventListener('click', () => decideAfterSale(a.id, 'reject', li));
      li.append(note, reject);
    }
    const n = afterSaleNotes.get(a.id);
    if (n) {
      const p = document.createElement('p');
      p.className = 'error';
      p.setAttribute('role', 'alert');
      p.textContent = n.text;
      li.append(p);
    }
    ul.append(li);
  }
  $('#after-sales').hidden = list.length === 0;
}

async function decideAfterSale(id, action, li) {
  li.querySelectorAll('button').forEach((b) => { b.disabled = true; });
  const note = li.querySelector('input.note');
  try {
    const res = await request('POST', `/admin/v1/after-sales/${id}/${action}`, action === 'reject' ? { note: note ? note.value.trim() : '' } : {});
    if (res.ok) afterSaleNotes.delete(id);
    else afterSaleNotes.set(id, { text: await problemText(res, action) });
  } catch (err) {
    if (session.token) afterSaleNotes.set(id, { text: t('error.reach', { message: err.message }) });
  }
  await loadAfterSales();
}

// The tickets the merchant's printers have not printed by their
// deadline, with a reprint each; asked again every PRINTS_EVERY_MS.
const PRINTS_EVERY_MS = 15000;
let printsTimer = null;
// reprintKeys keeps one Idempotency-Key per ticket until its reprint is
// answered: a tap repeated, or retried after a lost answer, reprints once.
const reprintKeys = new Map();

function newKey() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

async function loadLatePrints() {
  if (!session.token) return;
  try {
    const res = await request('GET', `/admin/v1/prints?status=late&merchant_id=${session.merchantId}`);
    if (!res.ok) return;
    renderLatePrints((await res.json()).tickets);
  } catch { /* the next round asks again */ }
}

function renderLatePrints(tickets) {
  const list = $('#prints-list');
  list.replaceChildren();
  for (const tk of tickets) {
    const li = document.createElement('li');
    li.dataset.ticket = tk.id;
    const what = document.createElement('span');
    const state = t(tk.status === 'failed' ? 'prints.failed' : 'prints.late') + (tk.last_error ? ` (${tk.last_error})` : '');
    what.textContent = t('prints.line', { order: tk.order_id.slice(-6), printer: tk.printer.name, state });
    const b = document.createElement('button');
    b.className = 'reprint';
    b.textContent = t('prints.reprint');
    b.addEventListener('click', () => reprint(tk.id, b));
    li.append(what, b);
    list.append(li);
  }
  $('#prints-late').hidden = tickets.length === 0;
}

async function reprint(id, button) {
  button.disabled = true;
  if (!reprintKeys.has(id)) reprintKeys.set(id, newKey());
  try {
    const res = await request('POST', `/admin/v1/prints/${id}/reprint`, undefined, { 'Idempotency-Key': reprintKeys.get(id) });
    if (res.ok) {
      reprintKeys.delete(id);
      button.textContent = t('prints.reprinting');
      return;
    }
    boardError(t('error.reprint', { message: await problemText(res) }));
  } catch (err) {
    if (session.token) boardError(t('error.reach', { message: err.message }));
  }
  button.disabled = false;
}

// loadDeliveries reads the couriers' deliveries of the open days; the
// stream keeps them current from then on.
async function loadDeliveries() {
  const since = new Date(midnight().getTime() - OPEN_DAYS * 86400000);
  try {
    const res = await request('GET', `/admin/v1/deliveries?merchant_id=${session.merchantId}&since=${encodeURIComponent(since.toISOString())}`);
    if (!res.ok) return;
    (await res.json()).deliveries.forEach((d) => upsertDelivery(d));
    renderFailedDeliveries();
  } catch { /* the stream brings the changes */ }
}

// upsertDelivery keeps an order's latest delivery: a later attempt, or a
// later change of the same one.
function upsertDelivery(d) {
  const had = deliveries.get(d.order_id);
  if (had && (had.attempt > d.attempt || (had.attempt === d.attempt && had.updated_at > d.updated_at))) return;
  deliveries.set(d.order_id, d);
}

// The orders the couriers gave up on, for the merchant to deliver.
function renderFailedDeliveries() {
  const list = $('#deliveries-list');
  list.replaceChildren();
  const failed = [...deliveries.values()].filter((d) => d.final);
  for (const d of failed) {
    const li = document.createElement('li');
    li.dataset.orderId = d.order_id;
    const what = document.createElement('span');
    what.textContent = t('deliveries.line', { order: d.order_id.slice(-6), provider: d.provider, reason: d.reason });
    li.append(what);
    list.append(li);
  }
  $('#deliveries-failed').hidden = failed.length === 0;
}

// loadToday reads the orders of the merchant's day, and those still
// open from the days before (scheduled orders placed ahead of their slot).
async function loadToday() {
  const today = midnight();
  const before = new Date(today.getTime() - OPEN_DAYS * 86400000);
  try {
    const ok = await loadOrders(`from=${encodeURIComponent(today.toISOString())}`)
      && await loadOrders(`status=PAID&from=${encodeURIComponent(before.toISOString())}`)
      && await loadOrders(`status=ACCEPTED&from=${encodeURIComponent(before.toISOString())}`)
      && await loadOrders(`status=READY&from=${encodeURIComponent(before.toISOString())}`);
    if (ok) boardError('');
  } catch (err) {
    if (session.token) boardError(t('error.load', { message: err.message }));
  }
  render();
}

// loadOrders reads the merchant's orders that query selects, page by page.
async function loadOrders(query) {
  let cursor = null;
  for (let page = 0; page < 10; page++) {
    let path = `/admin/v1/orders?merchant_id=${session.merchantId}&${query}&limit=200`;
    if (cursor) path += `&cursor=${encodeURIComponent(cursor)}`;
    const res = await request('GET', path);
    if (!res.ok) {
      boardError(t('error.load', { message: await problemText(res) }));
      return false;
    }
    const body = await res.json();
    body.orders.forEach((o) => upsert(o));
    cursor = body.next_cursor;
    if (!cursor) break;
  }
  return true;
}

function setLive(on) {
  const el = $('#live');
  el.textContent = t(on ? 'live.on' : 'live.off');
  el.classList.toggle('on', on);
}

// stream follows the merchant's order events, reconnecting with
// Last-Event-ID so no event is lost or repeated.
async function stream() {
  while (session.token) {
    const ctrl = new AbortController();
    streamAbort = ctrl;
    try {
      const headers = { Authorization: `Bearer ${session.token}`, Accept: 'text/event-stream' };
      if (lastEventId) headers['Last-Event-ID'] = lastEventId;
      const res = await fetch(`/admin/v1/merchants/${session.merchantId}/orders/stream`, { headers, signal: ctrl.signal, cache: 'no-store' });
      if (res.status === 401) {
        sessionEnded(t('session.ended'));
        return;
      }
      if (!res.ok) throw new Error(await problemText(res));
      setLive(true);
      boardError('');
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, '\n');
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          onBlock(block);
        }
      }
    } catch (err) {
      if (err.name === 'AbortError' || !session.token) return;
      boardError(t('error.stream', { message: err.message }));
    }
    setLive(false);
    await new Promise((r) => setTimeout(r, 2000));
  }
}

function onBlock(block) {
  let id = null;
  let event = 'message';
  let data = '';
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data += (data ? '\n' : '') + value;
  }
  if (id) lastEventId = id;
  if (event === 'stream.reset') {
    loadToday();
    return;
  }
  if (!event.startsWith('order.') || !data) return;
  const ev = JSON.parse(data);
  if (ev.type === 'order.delivery' && ev.delivery) {
    upsertDelivery(ev.delivery);
    renderFailedDeliveries();
    render();
    if (ev.delivery.final) ring();
    return;
  }
  if (!ev.order) return;
  upsert(ev.order);
  // A moved order is no longer news; a paid or urged one is, for a while.
  if (ev.type !== 'order.paid' && ev.type !== 'order.urged') fresh.delete(ev.order.id);
  if (ev.type === 'order.paid' || ev.type === 'order.urged') {
    fresh.add(ev.order.id);
    setTimeout(() => { fresh.delete(ev.order.id); render(); }, 10000);
    ring();
  }
  render();
}

// upsert keeps the newest version of an order.
function upsert(o) {
  if (o.status === 'PENDING_PAYMENT') return;
  const had = orders.get(o.id);
  if (had && had.version > o.version) return;
  orders.set(o.id, o);
}

// ring plays two short beeps and vibrates where it can.
function ring() {
  if (navigator.vibrate) navigator.vibrate([200, 100, 200]);
  if (!audio) return;
  const t = audio.currentTime;
  for (const at of [0, 0.35]) {
    const osc = audio.createOscillator();
    const gain = audio.createGain();
    osc.frequency.value = 880;
    gain.gain.setValueAtTime(0.3, t + at);
    gain.gain.exponentialRampToValueAtTime(0.001, t + at + 0.25);
    osc.connect(gain).connect(audio.destination);
    osc.start(t + at);
    osc.stop(t + at + 0.3);
  }
}

// ringUrgent is the escalation: three loud, higher beeps and a long
// vibration. document.body.dataset.urgentRings counts them.
function ringUrgent() {
  document.body.dataset.urgentRings = String(Number(document.body.dataset.urgentRings || 0) + 1);
  if (navigator.vibrate) navigator.vibrate([400, 100, 400, 100, 400]);
  if (!audio) return;
  const t = audio.currentTime;
  for (const at of [0, 0.3, 0.6]) {
    const osc = audio.createOscillator();
    const gain = audio.createGain();
    osc.type = 'square';
    osc.frequency.value = 1320;
    gain.gain.setValueAtTime(0.9, t + at);
    gain.gain.exponentialRampToValueAtTime(0.001, t + at + 0.25);
    osc.connect(gain).connect(audio.destination);
    osc.start(t + at);
    osc.stop(t + at + 0.3);
  }
}

const countdown = (ms) => {
  const s = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};

// showDeadline writes a paid card's countdown to its accept deadline and
// marks the card urgent in the last minute; it returns the time left.
function showDeadline(el) {
  const line = el.querySelector('.deadline');
  const left = Date.parse(line.dataset.acceptBy) - serverNow();
  const then = line.dataset.then === 'accept' ? 'accept' : 'reject';
  line.textContent = left > 0 ? t(`deadline.in.${then}`, { t: countdown(left) }) : t(`deadline.now.${then}`);
  el.classList.toggle('urgent', left <= URGENT_MS);
  return left;
}

// tick moves the countdowns on each second and rings louder for each
// paid order that turned urgent, and again every URGENT_RING_MS while
// one is.
function tick() {
  let urgent = false;
  let newly = false;
  for (const el of document.querySelectorAll('.card[data-status="PAID"]')) {
    if (!el.querySelector('.deadline').dataset.acceptBy) continue;
    if (showDeadline(el) > URGENT_MS) continue;
    urgent = true;
    if (!escalated.has(el.dataset.orderId)) {
      escalated.add(el.dataset.orderId);
      newly = true;
    }
  }
  if (newly || (urgent && Date.now() - lastUrgentRing >= URGENT_RING_MS)) {
    lastUrgentRing = Date.now();
    ringUrgent();
  }
}

const yuan = (fen) => `¥${(fen / 100).toFixed(2)}`;

function card(o) {
  const el = $('#card-template').content.firstElementChild.cloneNode(true);
  el.dataset.orderId = o.id;
  el.dataset.status = o.status;
  el.classList.toggle('fresh', fresh.has(o.id));
  el.dataset.fulfilment = o.fulfilment || 'delivery';
  el.querySelector('.no').textContent = `#${o.id.slice(-6)}`;
  el.querySelector('.time').textContent = when(o.created_at);
  el.querySelector('.status').textContent = t(`status.${o.status}`);
  if (o.pickup) {
    const p = el.querySelector('.pickup');
    p.textContent = t('pickup', { n: o.pickup.number });
    p.hidden = false;
  }
  if (o.slot) {
    const s = el.querySelector('.slot');
    s.textContent = t('slot', { from: when(o.slot.start), to: clock(o.slot.end) });
    s.hidden = false;
  }
  const items = el.querySelector('.items');
  for (const it of o.items) {
    const li = document.createElement('li');
    const opts = (it.options || []).map((x) => x.name).join(', ');
    li.textContent = `${it.name}${opts ? ` (${opts})` : ''} × ${it.qty}`;
    items.append(li);
  }
  el.querySelector('.remark').textContent = o.remark ? t('remark', { remark: o.remark }) : '';
  const a = o.address;
  el.querySelector('.address').textContent = a ? [a.name, pickup(o) ? a.phone : a.detail].filter(Boolean).join(' · ') : '';
  el.querySelector('.total').textContent = yuan(o.total_fen);
  const deadline = o.accept_deadline;
  const line = el.querySelector('.deadline');
  if (deadline && o.status === 'PAID') {
    line.dataset.acceptBy = deadline.accept_by;
    line.dataset.then = deadline.then;
    line.hidden = false;
    showDeadline(el);
  } else if (deadline && deadline.applied) {
    line.textContent = t(`deadline.applied.${deadline.then === 'accept' ? 'accept' : 'reject'}`);
    line.classList.add('applied');
    line.hidden = false;
  }
  const d = deliveries.get(o.id);
  if (d && !pickup(o)) {
    const r = el.querySelector('.rider');
    const status = t(`delivery.${d.status}`);
    if (d.final) r.textContent = t('rider.final', { reason: d.reason });
    else r.textContent = d.rider ? t('rider', { name: d.rider.name, status }) : t('rider.none', { status });
    r.classList.toggle('final', !!d.final);
    r.dataset.status = d.status;
    r.hidden = false;
  }
  const note = notes.get(o.id);
  const err = el.querySelector('.card-error');
  if (note) {
    err.textContent = note.text;
    err.hidden = false;
  }
  const buttons = el.querySelector('.actions');
  for (const action of actions(o)) {
    const b = document.createElement('button');
    b.textContent = t(`action.${action}`);
    b.className = action;
    b.dataset.action = action;
    b.addEventListener('click', () => act(o.id, action, el));
    buttons.append(b);
  }
  return el;
}

// act runs one action; the API's answer, good or bad, shows on the card.
async function act(id, action, el) {
  el.querySelectorAll('button').forEach((b) => { b.disabled = true; });
  try {
    const res = await request('POST', `/admin/v1/orders/${id}/${action}`);
    if (res.ok) {
      const o = await res.json();
      if (res.headers.get('Idempotent-Replayed') === 'true') {
        const auto = action === 'accept' && o.accept_deadline && o.accept_deadline.applied;
        notes.set(id, { text: auto ? t('already.auto') : t('already', { action: t(`action.${action}`) }) });
      } else {
        notes.delete(id);
      }
      fresh.delete(id);
      upsert(o);
    } else {
      notes.set(id, { text: await problemText(res, action) });
    }
  } catch (err) {
    if (session.token) notes.set(id, { text: t('error.reach', { message: err.message }) });
  }
  render();
}

function render() {
  const columns = $('#columns');
  const tabs = $('#tabs');
  columns.replaceChildren();
  tabs.replaceChildren();
  const all = [...orders.values()];
  for (const col of COLUMNS) {
    const list = all.filter(col.show);
    // The kitchen works oldest first, scheduled orders by slot; finished
    // orders show the latest first.
    const key = (o) => (o.slot ? o.slot.start : o.created_at);
    list.sort((a, b) => (col.key === 'done' ? b.updated_at.localeCompare(a.updated_at) : key(a).localeCompare(key(b))));
    const section = document.createElement('section');
    section.className = 'column';
    section.id = `col-${col.key}`;
    section.dataset.column = col.key;
    const h = document.createElement('h2');
    h.textContent = `${t(`col.${col.key}`)} (${list.length})`;
    section.append(h);
    if (list.length === 0) {
      const p = document.createElement('p');
      p.className = 'empty';
      p.textContent = t('empty');
      section.append(p);
    }
    list.forEach((o) => section.append(card(o)));
    columns.append(section);
    const a = document.createElement('a');
    a.href = `#col-${col.key}`;
    a.append(t(`col.${col.key}`));
    const n = document.createElement('span');
    n.className = 'count';
    n.textContent = list.length;
    a.append(n);
    tabs.append(a);
  }
}

loadStrings().then(() => {
  if (session.token) start();
  else showLogin();
});
