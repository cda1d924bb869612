// The inspector's page: what the model saw of a conversation, and why.
//
// Every value from the service reaches the page as text (textContent, text nodes,
// attributes), never as markup. Every request is a same-origin GET, so the page works
// under `make run` and under `python -m inspector` alike.
"use strict";

(() => {
  const PAGE_SIZE = 100;
  const LONG_TEXT_CHARACTERS = 600;
  const LONG_TEXT_LINES = 12;
  const PREVIEW_CHARACTERS = 280;
  const LONG_JSON_CHARACTERS = 240;

  const numbers = new Intl.NumberFormat("en-US");
  const count = (value) => numbers.format(Number(value) || 0);

  // Each standing: its words on a turn, its name in the legend, what it means.
  const STANDINGS = {
    window: {
      name: "in the window",
      meaning: "the next call's history holds it as recorded",
      label: () => "in the window",
    },
    trimmed: {
      name: "trimmed",
      meaning: "in the history, with its middle cut",
      label: (standing) => `trimmed — ${count(standing.omittedTokens)} tokens omitted`,
    },
    folded: {
      name: "folded into the memory",
      meaning: "the memory holds its gist; its words are not sent",
      label: () => "folded into the memory",
    },
    out_of_range: {
      name: "outside the history range",
      meaning: "older than the tenant's historyDays",
      label: () => "outside the history range",
    },
    held_by_neither: {
      name: "held by neither",
      meaning: "in range, yet in neither the history nor the memory: the model never sees it",
      label: () => "held by neither",
    },
  };

  // -- small helpers ------------------------------------------------------------------------

  const byId = (id) => document.getElementById(id);

  /** An element with attributes and children; strings become text nodes, never markup. */
  function el(tag, attributes, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== undefined && value !== null && value !== false) {
        element.setAttribute(name, value === true ? "" : String(value));
      }
    }
    element.append(...children.filter((child) => child !== null && child !== undefined));
    return element;
  }

  const encode = encodeURIComponent;

  function decodeSegment(segment) {
    try {
      return decodeURIComponent(segment);
    } catch {
      return segment;
    }
  }

  function instant(text) {
    // 2026-12-03T18:00:00.000000Z -> 2026-12-03 18:00:00 UTC, the stored precision aside.
    const found = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?Z$/.exec(String(text || ""));
    return found ? `${found[1]} ${found[2]} UTC` : String(text || "—");
  }

  function timeElement(text) {
    return el("time", { datetime: text || undefined }, instant(text));
  }

  function compactJson(value) {
    return JSON.stringify(value === undefined ? null : value);
  }

  function setStatus(message, isError) {
    const status = byId("status");
    status.textContent = message || "";
    status.classList.toggle("error", Boolean(isError));
  }

  function setBreadcrumbs(...crumbs) {
    const list = byId("breadcrumbs");
    list.replaceChildren(
      ...crumbs.map(([text, href]) =>
        el("li", {}, href ? el("a", { href }, text) : el("span", { "aria-current": "page" }, text)),
      ),
    );
  }

  const contactsPage = (tenant) => `/inspect?tenant=${encode(tenant)}`;
  const conversationPage = (tenant, contact) =>
    `/inspect/tenants/${encode(tenant)}/contacts/${encode(contact)}`;

  // -- the API ------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      const error = (body && body.error) || {};
      const message = error.message || (body && body.message) || "no explanation given";
      super(`${status}${error.code ? " " + error.code : ""}: ${message}`);
      this.status = status;
      this.code = error.code || null;
    }
  }

  async function getJson(url) {
    const response = await fetch(url, {
      headers: { Accept: "application/json" },
      cache: "no-store",
      credentials: "same-origin",
    });
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) {
      throw new ApiError(response.status, body);
    }
    return body;
  }

  function listingUrl(path, cursor) {
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (cursor) {
      query.set("cursor", cursor);
    }
    return `${path}?${query}`;
  }

  const contactsPath = (tenant) => `/v1/tenants/${encode(tenant)}/contacts`;
  const contactPath = (tenant, contact) => `${contactsPath(tenant)}/${encode(contact)}`;

  async function allTurns(tenant, contact) {
    const turns = [];
    let cursor = null;
    do {
      const page = await getJson(listingUrl(`${contactPath(tenant, contact)}/turns`, cursor));
      turns.push(...(page.turns || []));
      cursor = page.nextCursor;
    } while (cursor);
    return turns;
  }

  // -- /inspect: the tenants ----------------------------------------------------------------

  async function showTenants() {
    setBreadcrumbs(["Tenants"]);
    byId("tenants-view").hidden = false;
    byId("tenant-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const tenant = byId("tenant-input").value.trim();
      if (tenant) {
        window.location.assign(contactsPage(tenant));
      }
    });
    let tenants = [];
    try {
      tenants = (await getJson("/inspect/api/tenants")).tenants || [];
    } catch (error) {
      setStatus(`The tenants could not be listed (${error.message}); type a tenant id.`, true);
    }
    byId("tenant-list").replaceChildren(
      ...tenants.map((tenant) => el("li", {}, el("a", { href: contactsPage(tenant) }, tenant))),
    );
    byId("no-tenant-list").hidden = tenants.length > 0;
    if (!byId("status").classList.contains("error")) {
      setStatus("");
    }
  }

  // -- /inspect?tenant=t: the tenant's contacts ---------------------------------------------

  async function showContacts(tenant) {
    document.title = `${tenant} — conversation memory inspector`;
    setBreadcrumbs(["Tenants", "/inspect"], [tenant]);
    byId("contacts-heading").textContent = `Contacts of ${tenant}`;
    byId("contacts-view").hidden = false;
    byId("contact-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const contact = byId("contact-input").value.trim();
      if (contact) {
        window.location.assign(conversationPage(tenant, contact));
      }
    });
    const more = byId("more-contacts");
    let cursor = null;
    let shown = 0;
    async function loadPage() {
      more.disabled = true;
      setStatus("Loading contacts…");
      try {
        const page = await getJson(listingUrl(contactsPath(tenant), cursor));
        const contacts = page.contacts || [];
        shown += contacts.length;
        byId("contact-rows").append(
          ...contacts.map((contact) =>
            el(
              "tr",
              {},
              el("td", {}, el("a", { href: conversationPage(tenant, contact.contactId) },
                contact.contactId)),
              el("td", {}, contact.lastMessageAt ? timeElement(contact.lastMessageAt) : "never"),
            ),
          ),
        );
        cursor = page.nextCursor || null;
        more.hidden = !cursor;
        setStatus(shown ? "" : "No contact of this tenant has anything stored.");
      } catch (error) {
        setStatus(`The contacts could not be listed: ${error.message}`, true);
      } finally {
        more.disabled = false;
      }
    }
    more.addEventListener("click", loadPage);
    await loadPage();
  }

  // -- /inspect/tenants/{t}/contacts/{c}: one conversation ----------------------------------

  async function showConversation(tenant, contact) {
    document.title = `${contact} (${tenant}) — conversation memory inspector`;
    setBreadcrumbs(["Tenants", "/inspect"], [tenant, contactsPage(tenant)], [contact]);
    byId("conversation-heading").textContent = `Conversation of ${contact} (${tenant})`;
    setStatus("Loading the conversation…");
    const [turnsResult, previewResult] = await Promise.allSettled([
      allTurns(tenant, contact),
      getJson(`${contactPath(tenant, contact)}/window`),
    ]);
    if (turnsResult.status === "rejected") {
      setStatus(`The conversation could not be read: ${turnsResult.reason.message}`, true);
      return;
    }
    const turns = turnsResult.value;
    const preview = previewResult.status === "fulfilled" ? previewResult.value : null;
    byId("conversation-view").hidden = false;
    if (!preview) {
      const windowError = byId("window-error");
      windowError.textContent =
        `The window preview could not be read, so no turn's standing is known: ` +
        previewResult.reason.message;
      windowError.hidden = false;
    } else {
      renderFigures(preview);
    }
    renderLegend(preview);
    renderTurns(turns, preview);
    renderMemory(preview);
    renderUsage(turns);
    renderFragment(preview);
    setStatus("");
  }

  function definitionList(rows) {
    return el("dl", { class: "facts" }, ...rows.flatMap(([term, value]) => [el("dt", {}, term), el("dd", {}, value)]));
  }

  function renderFigures(preview) {
    const figures = preview.window || {};
    const range = preview.historyRange || {};
    const counts = preview.counts || {};
    byId("figures").replaceChildren(
      el(
        "section",
        { "aria-labelledby": "window-figures-heading" },
        el("h3", { id: "window-figures-heading" }, "Window"),
        definitionList([
          ["kept", count(figures.kept)],
          ["dropped", count(figures.dropped)],
          ["trimmed", count(figures.trimmed)],
          ["repaired", count(figures.repaired)],
          ["estimated tokens", count(figures.estimatedTokens)],
        ]),
      ),
      el(
        "section",
        { "aria-labelledby": "standing-counts-heading" },
        el("h3", { id: "standing-counts-heading" }, "Turns by standing"),
        definitionList(
          Object.entries(STANDINGS).map(([standing, about]) => [about.name, count(counts[standing])]),
        ),
      ),
      el(
        "section",
        { "aria-labelledby": "preview-heading" },
        el("h3", { id: "preview-heading" }, "Preview"),
        definitionList([
          ["previewed at", timeElement(preview.previewedAt)],
          ["history days", count(range.historyDays)],
          ["history since", timeElement(range.since)],
        ]),
      ),
    );
  }

  function renderLegend(preview) {
    const counts = (preview && preview.counts) || {};
    byId("legend").replaceChildren(
      el("h3", {}, "Legend"),
      el(
        "ul",
        { class: "legend" },
        ...Object.entries(STANDINGS).map(([standing, about]) =>
          el(
            "li",
            { class: `legend-item standing-${standing}` },
            el("span", { class: "swatch", "aria-hidden": "true" }),
            el("strong", {}, about.name),
            preview ? ` (${count(counts[standing])})` : "",
            `: ${about.meaning}`,
          ),
        ),
      ),
    );
  }

  function standingOf(turn, preview) {
    if (!preview) {
      return { key: "unknown", label: "standing unknown" };
    }
    const standing = (preview.standings || {})[turn.id];
    const about = standing && STANDINGS[standing.standing];
    if (!about) {
      return { key: "unknown", label: "no standing reported" };
    }
    return { key: standing.standing, label: about.label(standing) };
  }

  function renderTurns(turns, preview) {
    const list = byId("turn-list");
    if (!turns.length) {
      list.replaceChildren(el("li", { class: "note" }, "No turn is stored."));
      return;
    }
    list.replaceChildren(
      ...turns.map((turn, index) => {
        const standing = standingOf(turn, preview);
        return el(
          "li",
          {
            class: `turn standing-${standing.key}`,
            "data-turn-id": turn.id,
            "data-standing": standing.key,
          },
          el(
            "div",
            { class: "turn-head" },
            el("span", { class: "turn-number" }, `#${index + 1}`),
            el("span", { class: "turn-role" }, turn.role),
            el("span", { class: "turn-time" }, "sent ", timeElement(turn.sentAt)),
            turn.statedSentAt
              ? el("span", { class: "turn-time" }, "stated ", timeElement(turn.statedSentAt))
              : null,
            el("span", { class: "turn-id mono", title: "turn id" }, turn.id),
            el(
              "span",
              { class: "standing-label" },
              standing.key === "held_by_neither" ? "⚠ " : "",
              el("span", { class: "standing-text" }, standing.label),
            ),
          ),
          el("div", { class: "turn-body" }, ...(turn.content || []).map(renderBlock)),
          turn.usage ? usageLine(turn.usage) : null,
        );
      }),
    );
  }

  function usageLine(usage) {
    const parts = [
      `input ${count(usage.inputTokens)}`,
      `cache read ${count(usage.cacheReadInputTokens)}`,
      `cache write ${count(usage.cacheWriteInputTokens)}`,
      `output ${count(usage.outputTokens)}`,
    ];
    return el("p", { class: "usage-line" }, `usage: ${parts.join(" · ")}`);
  }

  function isLong(text) {
    return text.length > LONG_TEXT_CHARACTERS || text.split("\n").length > LONG_TEXT_LINES;
  }

  /** A text, collapsed behind a <details> when long: its beginning shows until opened. */
  function collapsible(text, what) {
    if (!isLong(text)) {
      return el("div", { class: "text-block" }, text);
    }
    const preview = el("div", { class: "text-preview" }, `${text.slice(0, PREVIEW_CHARACTERS)}…`);
    const details = el(
      "details",
      {},
      el("summary", {}, `Show the whole ${what} `, el("span", { class: "size" },
        `(${count(text.length)} characters)`)),
      el("div", { class: "text-full" }, text),
    );
    details.addEventListener("toggle", () => {
      preview.hidden = details.open;
    });
    return el("div", { class: "text-block" }, preview, details);
  }

  /** A tool result's text: inline beside its call id unless long. */
  function resultText(text) {
    return isLong(text) ? collapsible(text, "result") : el("span", { class: "result-text" }, text);
  }

  function jsonSnippet(value) {
    const text = compactJson(value);
    if (text.length <= LONG_JSON_CHARACTERS) {
      return el("code", {}, text);
    }
    const details = el(
      "details",
      { class: "json-details" },
      el("summary", {}, el("code", {}, `${text.slice(0, LONG_JSON_CHARACTERS)}…`), ` (${count(text.length)} characters)`),
      el("code", {}, text),
    );
    return details;
  }

  function renderBlock(block) {
    if (block && typeof block.text === "string") {
      return collapsible(block.text, "text");
    }
    if (block && block.toolUse) {
      const call = block.toolUse;
      return el(
        "div",
        { class: "tool-block" },
        el("span", { class: "tool-kind" }, "tool call "),
        el("code", {}, String(call.name)),
        " ",
        el("span", { class: "mono", title: "toolUseId" }, `(${call.toolUseId})`),
        " input ",
        jsonSnippet(call.input),
      );
    }
    if (block && block.toolResult) {
      const result = block.toolResult;
      const status = result.status
        ? el("span", { class: `tool-status-${result.status}` }, ` [${result.status}]`)
        : null;
      return el(
        "div",
        { class: "tool-block" },
        el("span", { class: "tool-kind" }, "tool result "),
        "for ",
        el("span", { class: "mono", title: "toolUseId" }, String(result.toolUseId)),
        status,
        ": ",
        ...(result.content || []).flatMap((part, index) => [
          index ? " · " : "",
          typeof part.text === "string" ? resultText(part.text) : jsonSnippet(part.json ?? part),
        ]),
      );
    }
    return el("div", { class: "tool-block" }, el("span", { class: "tool-kind" }, "block "), jsonSnippet(block));
  }

  function renderMemory(preview) {
    const holder = byId("memory");
    if (!preview) {
      holder.replaceChildren(el("p", { class: "note" }, "Unknown: the preview could not be read."));
      return;
    }
    const memory = preview.memory;
    if (!memory) {
      holder.replaceChildren(
        el("p", { class: "memory-none" }, "No memory yet: the next call serves no fold."),
      );
      return;
    }
    holder.replaceChildren(
      definitionList([
        ["version", count(memory.version)],
        ["covers", el("span", {}, timeElement(memory.coversFrom), " – ", timeElement(memory.coversUntil))],
        ["turns folded", count(memory.turnsFolded)],
      ]),
      el("h3", {}, "Summary"),
      el("div", { class: "memory-summary" }, String(memory.summary)),
    );
  }

  // -- the Converse fragment, its cache points marked ---------------------------------------

  function isCachePoint(value) {
    return (
      value !== null &&
      typeof value === "object" &&
      !Array.isArray(value) &&
      Object.keys(value).length === 1 &&
      "cachePoint" in value
    );
  }

  /** Pretty-printed JSON as text nodes, each cache point block in a <mark>. */
  function writeJson(target, value) {
    let pending = "";
    const text = (piece) => {
      pending += piece;
    };
    const flush = () => {
      if (pending) {
        target.append(pending);
        pending = "";
      }
    };
    const pad = (depth) => "  ".repeat(depth);
    function write(item, depth) {
      if (isCachePoint(item)) {
        flush();
        target.append(el("mark", { class: "cache-point", title: "cache point" }, compactJson(item)));
      } else if (Array.isArray(item)) {
        if (!item.length) {
          text("[]");
          return;
        }
        text("[\n");
        item.forEach((member, index) => {
          text(pad(depth + 1));
          write(member, depth + 1);
          text(index < item.length - 1 ? ",\n" : "\n");
        });
        text(`${pad(depth)}]`);
      } else if (item !== null && typeof item === "object") {
        const keys = Object.keys(item);
        if (!keys.length) {
          text("{}");
          return;
        }
        text("{\n");
        keys.forEach((key, index) => {
          text(`${pad(depth + 1)}${JSON.stringify(key)}: `);
          write(item[key], depth + 1);
          text(index < keys.length - 1 ? ",\n" : "\n");
        });
        text(`${pad(depth)}}`);
      } else {
        text(compactJson(item));
      }
    }
    write(value, 0);
    flush();
  }

  function renderFragment(preview) {
    const target = byId("fragment");
    target.replaceChildren();
    if (!preview || !preview.converse) {
      target.append("Unknown: the preview could not be read.");
      return;
    }
    const converse = preview.converse;
    writeJson(target, { system: converse.system || [], messages: converse.messages || [] });
  }

  // -- the usage chart ----------------------------------------------------------------------

  const SERIES = [
    { key: "inputTokens", name: "input tokens (not from the cache)", className: "input" },
    { key: "cacheReadInputTokens", name: "cache read", className: "cache-read" },
    { key: "cacheWriteInputTokens", name: "cache write", className: "cache-write" },
  ];

  function promptTokens(usage) {
    return SERIES.reduce((sum, series) => sum + (Number(usage[series.key]) || 0), 0);
  }

  /** Round tick steps (1, 2 or 5 times a power of ten), about five up to `maximum`. */
  function ticks(maximum) {
    if (maximum <= 0) {
      return [0, 1];
    }
    const rough = maximum / 5;
    const power = 10 ** Math.floor(Math.log10(rough));
    const step = [1, 2, 5, 10].map((factor) => factor * power).find((s) => s >= rough);
    const top = Math.ceil(maximum / step) * step;
    const values = [];
    for (let value = 0; value <= top + step / 2; value += step) {
      values.push(value);
    }
    return values;
  }

  function renderUsage(turns) {
    const replies = turns.filter((turn) => turn.role === "assistant");
    const measured = replies.filter((turn) => turn.usage);
    const note = byId("usage-note");
    const figure = byId("usage-figure");
    if (!measured.length) {
      note.textContent = replies.length
        ? `No usage was recorded for this conversation's ${count(replies.length)} replies ` +
          "(an agent sends it with the reply: POST …/turns with the reply's usage)."
        : "No usage was recorded: the conversation has no reply yet.";
      note.hidden = false;
      figure.hidden = true;
      return;
    }
    if (measured.length < replies.length) {
      note.textContent =
        `${count(replies.length - measured.length)} of ${count(replies.length)} replies ` +
        "carry no usage (marked × on the axis).";
      note.hidden = false;
    }
    figure.hidden = false;
    drawChart(byId("usage-chart"), replies);
    byId("usage-legend").replaceChildren(
      ...SERIES.map((series) =>
        el("span", {}, el("span", { class: `key key-${series.className}`, "aria-hidden": "true" }),
          series.name),
      ),
      el("span", {}, el("span", { class: "key key-prompt", "aria-hidden": "true" }),
        "prompt tokens (input + cache read + cache write)"),
    );
  }

  function drawChart(svg, replies) {
    // The SVG namespace is taken from the <svg> the page holds, so no URL is written here.
    const namespace = svg.namespaceURI;
    const shape = (tag, attributes, ...children) => {
      const element = document.createElementNS(namespace, tag);
      for (const [name, value] of Object.entries(attributes)) {
        element.setAttribute(name, String(value));
      }
      element.append(...children);
      return element;
    };
    const [title] = svg.getElementsByTagName("title");
    svg.replaceChildren(title);

    const width = 960;
    const height = 360;
    const margin = { top: 16, right: 24, bottom: 64, left: 78 };
    const plotWidth = width - margin.left - margin.right;
    const plotHeight = height - margin.top - margin.bottom;
    const maximum = Math.max(...replies.map((turn) => (turn.usage ? promptTokens(turn.usage) : 0)));
    const yTicks = ticks(maximum);
    const top = yTicks[yTicks.length - 1];
    const y = (value) => margin.top + plotHeight - (value / top) * plotHeight;
    const band = plotWidth / replies.length;
    const x = (index) => margin.left + band * index + band / 2;
    const barWidth = Math.max(2, Math.min(48, band * 0.6));

    const grid = shape("g", { class: "grid" });
    const yAxis = shape("g", { class: "axis axis-y" });
    for (const value of yTicks) {
      grid.append(shape("line", { x1: margin.left, x2: width - margin.right, y1: y(value), y2: y(value) }));
      yAxis.append(
        shape("line", { x1: margin.left - 5, x2: margin.left, y1: y(value), y2: y(value) }),
        shape("text", { x: margin.left - 8, y: y(value) + 4, "text-anchor": "end" }, count(value)),
      );
    }
    yAxis.append(
      shape("line", { x1: margin.left, x2: margin.left, y1: margin.top, y2: margin.top + plotHeight }),
      shape(
        "text",
        {
          class: "axis-label",
          "text-anchor": "middle",
          transform: `translate(18 ${margin.top + plotHeight / 2}) rotate(-90)`,
        },
        "tokens",
      ),
    );

    const xAxis = shape("g", { class: "axis axis-x" });
    const every = Math.ceil(replies.length / 24);
    replies.forEach((turn, index) => {
      if (index % every === 0 || index === replies.length - 1) {
        xAxis.append(
          shape("line", { x1: x(index), x2: x(index), y1: margin.top + plotHeight, y2: margin.top + plotHeight + 5 }),
          shape("text", { x: x(index), y: margin.top + plotHeight + 20, "text-anchor": "middle" }, String(index + 1)),
        );
      }
    });
    xAxis.append(
      shape("line", {
        x1: margin.left,
        x2: width - margin.right,
        y1: margin.top + plotHeight,
        y2: margin.top + plotHeight,
      }),
      shape(
        "text",
        { class: "axis-label", x: margin.left + plotWidth / 2, y: height - 12, "text-anchor": "middle" },
        "reply, oldest first",
      ),
    );

    const bars = shape("g", { class: "bars" });
    const line = shape("g", { class: "prompt" });
    let segment = [];
    const closeSegment = () => {
      if (segment.length > 1) {
        line.append(shape("polyline", { class: "prompt-line", points: segment.join(" ") }));
      }
      segment = [];
    };
    replies.forEach((turn, index) => {
      if (!turn.usage) {
        closeSegment();
        bars.append(
          shape(
            "text",
            { class: "no-usage", x: x(index), y: margin.top + plotHeight - 4, "text-anchor": "middle" },
            "×",
            shape("title", {}, `reply ${index + 1}: no usage recorded`),
          ),
        );
        return;
      }
      let base = 0;
      for (const series of SERIES) {
        const value = Number(turn.usage[series.key]) || 0;
        if (value > 0) {
          bars.append(
            shape(
              "rect",
              {
                class: `bar bar-${series.className}`,
                x: x(index) - barWidth / 2,
                y: y(base + value),
                width: barWidth,
                height: Math.max(0.5, y(base) - y(base + value)),
              },
              shape("title", {}, `reply ${index + 1}: ${series.name} ${count(value)}`),
            ),
          );
        }
        base += value;
      }
      const total = promptTokens(turn.usage);
      segment.push(`${x(index)},${y(total)}`);
      line.append(
        shape(
          "circle",
          { class: "prompt-point", cx: x(index), cy: y(total), r: 3.5 },
          shape("title", {}, `reply ${index + 1}: prompt tokens ${count(total)}`),
        ),
      );
    });
    closeSegment();
    svg.append(grid, bars, line, yAxis, xAxis);
  }

  // -- which page -------------------------------------------------------------------------

  function route() {
    const conversation = /^\/inspect\/tenants\/([^/]+)\/contacts\/([^/]+)$/.exec(
      window.location.pathname,
    );
    if (conversation) {
      return showConversation(decodeSegment(conversation[1]), decodeSegment(conversation[2]));
    }
    const tenant = new URLSearchParams(window.location.search).get("tenant");
    return tenant ? showContacts(tenant) : showTenants();
  }

  route().catch((error) => setStatus(`The page failed: ${error.message}`, true));
})();
