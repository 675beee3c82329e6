// A live log view that keeps a bounded window of lines in the DOM: older
// lines are dropped (and counted on the page), so that a log of any size
// streams without the page's memory growing past the window.

// maxLines is how many lines the view keeps.
export const maxLines = 5000;
// maxLine is the longest line kept whole; a longer run without a line
// break is cut into lines of this length.
const maxLine = 16384;

// LogView shows a stream of text in a <pre>.
export class LogView {
  constructor(pre, note) {
    this.pre = pre;
    this.note = note;
    this.partial = '';
    this.pending = [];
    this.dropped = 0;
    this.total = 0;
    this.scheduled = false;
    this.decoder = new TextDecoder();
  }

  // write adds bytes (an ArrayBuffer) or text to the log.
  write(data) {
    const text = typeof data === 'string' ? data : this.decoder.decode(data, { stream: true });
    const parts = (this.partial + text).split('\n');
    this.partial = parts.pop();
    while (this.partial.length > maxLine) {
      parts.push(this.partial.slice(0, maxLine));
      this.partial = this.partial.slice(maxLine);
    }
    for (const p of parts) this.pending.push(p);
    if (this.pending.length > maxLines) {
      this.dropped += this.pending.length - maxLines;
      this.pending.splice(0, this.pending.length - maxLines);
    }
    this.schedule();
  }

  // end flushes the last line.
  end() {
    if (this.partial) {
      this.pending.push(this.partial);
      this.partial = '';
    }
    this.schedule();
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.scheduled = false;
    if (!this.pending.length) return;
    const frag = document.createDocumentFragment();
    for (const line of this.pending) {
      const div = document.createElement('div');
      div.textContent = line;
      frag.append(div);
    }
    this.total += this.pending.length;
    this.pending = [];
    const atEnd = this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - 4;
    this.pre.append(frag);
    let extra = this.pre.childElementCount - maxLines;
    if (extra > 0) this.dropped += extra;
    while (extra-- > 0) this.pre.firstElementChild.remove();
    if (this.dropped) this.note.textContent = `${this.dropped} earlier lines dropped: the view keeps the last ${maxLines}.`;
    if (atEnd) this.pre.scrollTop = this.pre.scrollHeight;
  }
}

// follow streams a command's log over the toolbox's follow WebSocket into
// view; onEnd gets the close event.
export function follow(url, view, onEnd) {
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  ws.onmessage = (ev) => view.write(ev.data);
  ws.onclose = (ev) => { view.end(); onEnd(ev); };
  return ws;
}
