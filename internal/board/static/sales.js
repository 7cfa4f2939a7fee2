// The sales page: a merchant's money by day from the ledger (the
// statement the API serves), as a chart of what the merchant is owed each
// day, a table of every figure, the best-selling dishes and the CSV
// download. Staff log in on the board; the page uses that session. Every
// word is in strings.json.
'use strict';

const $ = (sel) => document.querySelector(sel);
let strings = {};
let lang = new URLSearchParams(location.search).get('lang') || localStorage.getItem('takeout.lang') || 'zh-CN';
function t(key, vars) {
  const text = strings[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (m, name) => (vars && name in vars ? String(vars[name]) : m));
}
async function loadStrings() {
  const all = await (await fetch('strings.json', { cache: 'no-cache' })).json();
  if (!all[lang]) lang = 'zh-CN';
  strings = all[lang];
  document.documentElement.lang = lang;
  document.title = t('sales.title');
  for (const el of document.querySelectorAll('[data-text]')) el.textContent = t(el.dataset.text);
}

const token = sessionStorage.getItem('takeout.token');
const merchantId = sessionStorage.getItem('takeout.merchant');
const yuan = (fen) => `¥${(fen / 100).toFixed(2)}`;
const FIGURES = ['orders', 'gross_fen', 'merchant_discount_fen', 'platform_discount_fen', 'refunds_fen', 'commission_fen', 'net_fen'];
let days = 7;
let statement = null;

const api = (path) => fetch(path, { headers: { Authorization: `Bearer ${token}` } });

// todayIn is the date (YYYY-MM-DD) now in a time zone.
const todayIn = (timeZone) => new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());

async function load() {
  $('#sales-error').hidden = true;
  const base = `/admin/v1/merchants/${merchantId}/statement`;
  let res = await api(base);
  if (res.ok) {
    const week = await res.json();
    if (days !== 7) {
      const to = todayIn(week.time_zone);
      const from = new Date(Date.parse(`${to}T00:00:00Z`) - (days - 1) * 86400000).toISOString().slice(0, 10);
      res = await api(`${base}?from=${from}&to=${to}`);
      statement = res.ok ? await res.json() : null;
    } else {
      statement = week;
    }
  }
  if (!res.ok) {
    $('#sales-error').textContent = t('sales.error', { status: res.status });
    $('#sales-error').hidden = false;
    return;
  }
  render();
}

function render() {
  const s = statement;
  $('#range').textContent = t('sales.range', { from: s.from, to: s.to });
  const totals = $('#totals');
  totals.replaceChildren();
  for (const key of ['orders', 'gross_fen', 'net_fen']) {
    const dt = document.createElement('dt');
    dt.textContent = t(`sales.${key.replace('_fen', '')}`);
    const dd = document.createElement('dd');
    dd.dataset.figure = key;
    dd.textContent = key === 'orders' ? String(s.totals.orders) : yuan(s.totals[key]);
    totals.append(dt, dd);
  }
  chart(s.days);
  const body = $('#days tbody');
  body.replaceChildren();
  for (const d of s.days) {
    const tr = document.createElement('tr');
    tr.dataset.date = d.date;
    const cells = [d.date, ...FIGURES.map((k) => (k === 'orders' ? String(d.orders) : yuan(d[k])))];
    for (const [i, text] of cells.entries()) {
      const td = document.createElement('td');
      td.textContent = text;
      if (i > 0) td.dataset.figure = FIGURES[i - 1];
      tr.append(td);
    }
    body.append(tr);
  }
  const top = $('#top');
  top.replaceChildren();
  for (const dish of s.top_dishes) {
    const li = document.createElement('li');
    li.textContent = t('sales.dish', { name: dish.name, qty: dish.qty, sales: yuan(dish.sales_fen) });
    top.append(li);
  }
}

// chart draws a bar per day of what the merchant is owed, scaled to the
// largest; a day owed nothing has no height, a day owed back (refunds
// over sales) is drawn red below the line.
function chart(list) {
  const svg = $('#chart');
  svg.setAttribute('aria-label', t('sales.chart'));
  svg.replaceChildren();
  const ns = 'http://www.w3.org/2000/svg';
  const W = 700, H = 220, base = 190, top = 20;
  const most = Math.max(1, ...list.map((d) => Math.abs(d.net_fen)));
  const step = W / list.length;
  list.forEach((d, i) => {
    const h = Math.round((Math.abs(d.net_fen) / most) * (base - top));
    const bar = document.createElementNS(ns, 'rect');
    bar.setAttribute('x', String(i * step + step * 0.15));
    bar.setAttribute('width', String(step * 0.7));
    bar.setAttribute('y', String(d.net_fen >= 0 ? base - h : base));
    bar.setAttribute('height', String(h));
    bar.setAttribute('class', d.net_fen >= 0 ? 'bar-up' : 'bar-down');
    bar.dataset.date = d.date;
    bar.dataset.fen = String(d.net_fen);
    const title = document.createElementNS(ns, 'title');
    title.textContent = `${d.date} ${yuan(d.net_fen)}`;
    bar.append(title);
    const label = document.createElementNS(ns, 'text');
    label.setAttribute('x', String(i * step + step / 2));
    label.setAttribute('y', String(H - 8));
    label.setAttribute('text-anchor', 'middle');
    label.setAttribute('class', 'bar-label');
    label.textContent = d.date.slice(5);
    svg.append(bar, label);
  });
}

async function downloadCSV() {
  const res = await api(`/admin/v1/merchants/${merchantId}/statement?from=${statement.from}&to=${statement.to}&format=csv`);
  if (!res.ok) {
    $('#sales-error').textContent = t('sales.error', { status: res.status });
    $('#sales-error').hidden = false;
    return;
  }
  const a = document.createElement('a');
  a.href = URL.createObjectURL(await res.blob());
  a.download = `statement-${merchantId}-${statement.from}-${statement.to}.csv`;
  a.click();
  URL.revokeObjectURL(a.href);
}

async function start() {
  await loadStrings();
  for (const b of document.querySelectorAll('button.lang')) {
    b.addEventListener('click', async () => {
      lang = lang === 'zh-CN' ? 'en' : 'zh-CN';
      localStorage.setItem('takeout.lang', lang);
      await loadStrings();
      if (statement) render();
    });
  }
  if (!token || !merchantId) {
    $('#sales-login').hidden = false;
    return;
  }
  $('#who').textContent = t('who', { user: sessionStorage.getItem('takeout.username'), merchant: merchantId });
  for (const b of document.querySelectorAll('[data-days]')) {
    b.addEventListener('click', () => { days = Number(b.dataset.days); load(); });
  }
  $('#csv').addEventListener('click', downloadCSV);
  $('#sales').hidden = false;
  await load();
}

start();
