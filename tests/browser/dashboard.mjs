// The dashboard in a real browser (Debian's chromium, headless), run by
// primary/tests/it/dashboard_browser.rs against a real primary with two
// satellites serving the testbed plugin. Environment:
//   ORRERY_URL        the primary (http://127.0.0.1:PORT)
//   ORRERY_TOKEN      an admin token
//   CHROMIUM          the browser binary (default /usr/bin/chromium)
//   SCREENSHOT_DIR    where the screenshots go
//   SATELLITES        comma-separated satellite ids the fleet page must list
// Every wait is bounded; the first failed check exits non-zero.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const url = process.env.ORRERY_URL;
const token = process.env.ORRERY_TOKEN;
const shots = process.env.SCREENSHOT_DIR;
const satellites = (process.env.SATELLITES || "").split(",").filter(Boolean);
const WAIT = 90_000;
mkdirSync(shots, { recursive: true });

function check(ok, what) {
  if (!ok) throw new Error("check failed: " + what);
  console.log("ok: " + what);
}

async function api(path, body) {
  const r = await fetch(url + path, {
    method: body ? "POST" : "GET",
    headers: { authorization: "Bearer " + token, "content-type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await r.json();
  if (r.status >= 300) throw new Error(`${path}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

// A stack of testbed things: `count` things `prefix-N` per target. Things
// from `DEPENDENT` on reference the thing `DEPENDENT` before them (edges
// for the graph); `prefix-0` has a write-only secret (masked in the plan).
const DEPENDENT = 200;
const SECRET = "hunter2-in-the-browser";
function doc(stack, targets, groups) {
  let text = `stack: ${stack}\ntargets:\n`;
  for (const [name, config] of Object.entries(targets)) {
    text += `  - name: ${name}\n    plugin: testbed\n    config: ${config}\n`;
  }
  text += "resources:\n";
  for (const [target, count, prefix] of groups) {
    for (let i = 0; i < count; i++) {
      const value = i >= DEPENDENT ? `"\${${prefix}-${i - DEPENDENT}.name}"` : String(i);
      const secret = i === 0 ? `, secret: ${SECRET}` : "";
      text += `  - label: ${prefix}-${i}\n    type: Testbed::Async::Thing\n    target: ${target}\n` +
        `    properties: { name: ${prefix}-${i}, value: ${value}${secret} }\n`;
    }
  }
  return text;
}

async function shot(page, name) {
  const path = join(shots, name + ".png");
  await page.screenshot({ path, fullPage: false });
  console.log("screenshot: " + path);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  timeout: WAIT,
  args: [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--disable-dev-shm-usage",
  ],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });

  // Signed out: the login page.
  await page.goto(url + "/ui/commands");
  check(page.url().endsWith("/ui/login"), "an unauthenticated page redirects to the login");
  await shot(page, "01-login");
  await page.fill("#token", "orr_not_a_token");
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("p.error");
  check((await page.textContent("p.error")).includes("not valid"), "a wrong token is refused");
  await page.fill("#token", token);
  await page.click("form.login button[type=submit]");
  await page.waitForURL("**/ui/commands");
  check(true, "signed in");
  // The refused token's 401 was an error of the console; none from here on.
  consoleErrors.length = 0;

  // An apply of 300 things, 40 of which fail.
  const first = await api("/v1/stacks/apply", {
    document: // Each satellite runs its own testbed process, whose things live in its
    // memory: `polls: 0` needs no status poll (which the other might answer).
    doc("dash", { lab: "{ polls: 0 }", flaky: "{ fail_code: InvalidRequest }" },
      [["lab", 260, "ok"], ["flaky", 40, "bad"]]),
  });
  await page.goto(url + "/ui/commands/" + first.command_id);
  await page.waitForFunction(() => {
    const o = document.getElementById("outcome");
    return o && ["completed", "failed", "canceled", "error"].includes(o.textContent.trim());
  }, null, { timeout: WAIT });
  const outcome = (await page.textContent("#outcome")).trim();
  const count = async (name) => Number(await page.textContent(`[data-count="${name}"]`));
  check(outcome === "failed", `the live page reached "failed" (${outcome})`);
  await page.waitForFunction(() => document.getElementById("done").textContent === "300", null, { timeout: 10_000 });
  check(await count("succeeded") === 260, "260 succeeded");
  check(await count("failed") === 40, "40 failed");
  check(Number(await page.getAttribute("#progress", "value")) === 300, "the progress bar is full");
  await shot(page, "02-command-finished");

  // The plan's values diff: the secret masked, never shown.
  const plan = page.locator("details.change", { hasText: "ok-0" }).first();
  await plan.locator("summary").click();
  check((await plan.textContent()).includes("(sensitive)"), "the plan masks the write-only secret");
  check(!(await page.content()).includes(SECRET), "the secret is nowhere in the page");
  check((await page.textContent("main")).includes("300 to create"), "the plan counts 300 creates");

  // A failed operation's error.
  await page.fill("#filter", "bad-7");
  const row = page.locator("#ops tbody tr:not([hidden])", { hasText: "bad-7" }).first();
  await row.locator("details summary").click();
  const message = await row.locator("details pre").textContent();
  check(message.includes("injected failure"), "a failed operation's error is shown: " + message);
  check(await page.locator("#ops tbody tr:not([hidden])").count() < 300, "the filter hides the other rows");
  await shot(page, "03-failed-operation-error");

  // The dependency graph.
  await page.click("text=Dependency graph");
  await page.waitForSelector("svg rect.node");
  check(await page.locator("svg rect.node").count() === 300, "the graph draws every operation");
  check(await page.locator("svg line.edge").count() === 260 - DEPENDENT, "the graph draws the recorded dependencies");
  await shot(page, "04-graph");

  // Stacks.
  await page.click("nav >> text=Stacks");
  await page.waitForSelector("#stack-dash");
  check((await page.textContent("main")).includes("260 resources"), "the stack lists its 260 resources");
  await shot(page, "05-stacks");

  // Fleet.
  await page.click("nav >> text=Fleet");
  await page.waitForSelector("h1");
  const fleet = await page.textContent("main");
  for (const s of satellites) check(fleet.includes(s), "the fleet page lists satellite " + s);
  await shot(page, "06-fleet");

  // A slow apply, canceled from its page.
  const slow = await api("/v1/stacks/apply", {
    document: doc("dash-slow", { slow: "{ polls: 0, delay_ms: 2000 }" }, [["slow", 120, "slow"]]),
  });
  await page.goto(url + "/ui/commands/" + slow.command_id);
  await page.waitForSelector("#cancel button");
  // Live: the counts move on this page, without a reload, from the stream.
  const before = await count("succeeded");
  await page.evaluate(() => { window.__notReloaded = true; });
  await page.waitForFunction((n) => Number(document.querySelector('[data-count="succeeded"]').textContent) > n,
    before, { timeout: 30_000 });
  check(await page.evaluate(() => window.__notReloaded === true),
    `the running page counted successes live (${before} -> ${await count("succeeded")})`);
  await shot(page, "07-slow-running");
  await page.click("#cancel button");
  await page.waitForFunction(() => document.getElementById("outcome")?.textContent.trim() === "canceled",
    null, { timeout: WAIT });
  check(await count("canceled") > 0, `operations were canceled (${await count("canceled")})`);
  check(await count("succeeded") < 120, "the canceled apply did not run every operation");
  await shot(page, "08-slow-canceled");

  // The commands list, and a phone-width view.
  await page.click("nav >> text=Commands");
  await page.waitForSelector("table.list");
  check(await page.locator("table.list tbody tr").count() >= 2, "the commands list shows both applies");
  await shot(page, "09-commands");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(url + "/ui/commands/" + first.command_id);
  await page.waitForSelector("#outcome");
  await shot(page, "10-command-phone");

  // Signing out ends the session.
  await page.click("form.logout button");
  await page.waitForURL("**/ui/login");
  await page.goto(url + "/ui/commands");
  check(page.url().endsWith("/ui/login"), "signed out");
  check(consoleErrors.length === 0, "no console errors (CSP violations among them): " + consoleErrors.join("; "));
  console.log("dashboard browser test passed");
} catch (e) {
  for (const p of browser.contexts().flatMap((c) => c.pages())) {
    const path = join(shots, "failure.png");
    await p.screenshot({ path }).catch(() => {});
    console.log("failure at " + p.url() + "; screenshot: " + path);
    console.log((await p.textContent("body").catch(() => "")).slice(0, 2000));
  }
  throw e;
} finally {
  await browser.close();
}
