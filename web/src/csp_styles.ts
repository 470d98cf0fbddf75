// xterm.js's DOM renderer writes its per-terminal CSS (cell sizes, theme colours, cursor) into
// <style> elements. berthd's Content-Security-Policy has no 'unsafe-inline' for styles, so
// the browser refuses to apply those. This mirrors the text of every <style> element under
// `root` into one constructed stylesheet (document.adoptedStyleSheets), which a CSP does not
// govern; the <style> elements themselves stay inert.

export function mirrorInlineStyles(root: HTMLElement): () => void {
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  let last = '';
  const sync = () => {
    const text = Array.from(root.querySelectorAll('style'), (s) => s.textContent ?? '').join('\n');
    if (text !== last) {
      last = text;
      sheet.replaceSync(text);
    }
  };
  const observer = new MutationObserver(sync);
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  sync();
  return () => {
    observer.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
  };
}
