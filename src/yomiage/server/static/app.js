// yomiage playground: POST /tts, play the WAV stream as it arrives (Web Audio),
// then hand the whole file to the <audio> element and the download link.
"use strict";

const $ = (id) => document.getElementById(id);
const SLIDERS = ["speed", "style_weight", "sdp_ratio", "noise", "noise_w"];
let voices = [];
let controller = null;
let objectUrl = null;

function headers(json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function say(text, isError) {
  $("message").textContent = text;
  $("message").className = isError ? "error" : "";
}

async function errorText(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (e) {
    // not JSON: fall through
  }
  return "HTTP " + response.status;
}

function fillSelect(select, items) {
  select.replaceChildren();
  for (const [value, label] of items) {
    const option = document.createElement("option");
    option.value = String(value);
    option.textContent = label;
    select.append(option);
  }
}

function voiceChanged() {
  const voice = voices.find((v) => v.id === $("voice").value);
  if (!voice) return;
  fillSelect($("style"), voice.styles.map((s) => [s, s]));
  const speakers = Object.entries(voice.speakers).sort((a, b) => a[1] - b[1]);
  fillSelect($("speaker"), speakers.map(([name, id]) => [id, name]));
  $("speaker").disabled = speakers.length < 2;
}

async function loadVoices() {
  const response = await fetch("/v1/audio/voices", { headers: headers(false) });
  if (!response.ok) {
    $("server-status").textContent = "cannot list voices: " + (await errorText(response));
    return;
  }
  voices = (await response.json()).voices;
  fillSelect($("voice"), voices.map((v) => [v.id, v.id]));
  const preferred = voices.find((v) => v.default);
  if (preferred) $("voice").value = preferred.id;
  voiceChanged();
  const ready = await fetch("/ready");
  if (ready.ok) {
    const limit = (await ready.json()).max_input_chars;
    $("text").maxLength = limit;
    $("char-limit").textContent = String(limit);
  }
  $("server-status").textContent =
    (ready.ok ? "ready" : "warming up") + " · " + voices.length + " voice(s)";
}

function wavHeader(sampleRate, dataBytes) {
  const header = new DataView(new ArrayBuffer(44));
  const text = (offset, s) => [...s].forEach((c, i) => header.setUint8(offset + i, c.charCodeAt(0)));
  text(0, "RIFF");
  header.setUint32(4, 36 + dataBytes, true);
  text(8, "WAVE");
  text(12, "fmt ");
  header.setUint32(16, 16, true);
  header.setUint16(20, 1, true); // PCM
  header.setUint16(22, 1, true); // mono
  header.setUint32(24, sampleRate, true);
  header.setUint32(28, sampleRate * 2, true);
  header.setUint16(32, 2, true);
  header.setUint16(34, 16, true);
  text(36, "data");
  header.setUint32(40, dataBytes, true);
  return header.buffer;
}

// Plays little-endian 16-bit mono PCM as it arrives, gap-free.
class StreamPlayer {
  constructor(sampleRate) {
    this.context = new AudioContext();
    this.sampleRate = sampleRate;
    this.next = this.context.currentTime + 0.1;
    this.carry = null; // an odd byte left from the previous piece
  }

  push(bytes) {
    if (this.carry !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.carry;
      joined.set(bytes, 1);
      bytes = joined;
      this.carry = null;
    }
    if (bytes.length % 2 === 1) {
      this.carry = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    const n = bytes.length / 2;
    if (n === 0) return;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const buffer = this.context.createBuffer(1, n, this.sampleRate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < n; i++) channel[i] = view.getInt16(2 * i, true) / 32768;
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    this.next = Math.max(this.next, this.context.currentTime + 0.02);
    source.start(this.next);
    this.next += buffer.duration;
  }

  close() {
    this.context.close();
  }
}

function request() {
  const body = {
    text: $("text").value,
    voice: $("voice").value,
    style: $("style").value,
    speaker_id: Number($("speaker").value || 0),
    // The slider shows "faster is bigger"; the API's speed is a length scale.
    speed: 1 / Number($("speed").value),
    style_weight: Number($("style_weight").value),
    sdp_ratio: Number($("sdp_ratio").value),
    noise: Number($("noise").value),
    noise_w: Number($("noise_w").value),
    format: "wav",
    stream: true,
  };
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  return body;
}

async function speak(event) {
  event.preventDefault();
  if (controller) controller.abort();
  controller = new AbortController();
  $("speak").disabled = true;
  $("stop").disabled = false;
  $("download").hidden = true;
  say("reading…", false);
  const started = performance.now();
  let player = null;
  try {
    const response = await fetch("/tts", {
      method: "POST",
      headers: headers(true),
      body: JSON.stringify(request()),
      signal: controller.signal,
    });
    if (!response.ok) {
      say(await errorText(response), true);
      return;
    }
    const reader = response.body.getReader();
    const pieces = [];
    let header = new Uint8Array(0);
    let sampleRate = 0;
    let firstAudio = 0;
    let bytes = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let data = value;
      if (sampleRate === 0) {
        // The first 44 bytes are the WAV header (its sizes are "unknown").
        const joined = new Uint8Array(header.length + data.length);
        joined.set(header);
        joined.set(data, header.length);
        if (joined.length < 44) {
          header = joined;
          continue;
        }
        sampleRate = new DataView(joined.buffer).getUint32(24, true);
        player = new StreamPlayer(sampleRate);
        data = joined.subarray(44);
      }
      if (data.length === 0) continue;
      if (!firstAudio) firstAudio = performance.now();
      player.push(data);
      pieces.push(data);
      bytes += data.length;
    }
    const pcm = bytes - (bytes % 2);
    const blob = new Blob([wavHeader(sampleRate, pcm), ...pieces], { type: "audio/wav" });
    if (objectUrl) URL.revokeObjectURL(objectUrl);
    objectUrl = URL.createObjectURL(blob);
    $("player").src = objectUrl;
    $("download").href = objectUrl;
    $("download").hidden = false;
    const seconds = pcm / 2 / sampleRate;
    say(
      `first audio after ${Math.round(firstAudio - started)} ms · ` +
        `${seconds.toFixed(2)} s of audio in ${((performance.now() - started) / 1000).toFixed(2)} s`,
      false
    );
  } catch (error) {
    if (error.name === "AbortError") {
      say("stopped", false);
      if (player) player.close();
    } else {
      say(String(error), true);
    }
  } finally {
    controller = null;
    $("speak").disabled = false;
    $("stop").disabled = true;
  }
}

function init() {
  $("voice").addEventListener("change", voiceChanged);
  $("speak-form").addEventListener("submit", speak);
  $("stop").addEventListener("click", () => controller && controller.abort());
  $("text").addEventListener("input", () => {
    $("char-count").textContent = String($("text").value.length);
  });
  $("api-key").addEventListener("change", loadVoices);
  for (const id of SLIDERS) {
    const show = () => ($(id + "-value").textContent = Number($(id).value).toFixed(2));
    $(id).addEventListener("input", show);
    show();
  }
  loadVoices().catch((error) => {
    $("server-status").textContent = "cannot reach the server: " + error;
  });
}

document.addEventListener("DOMContentLoaded", init);
