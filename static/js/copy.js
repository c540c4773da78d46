// Copy-to-clipboard for the canonical manifest. The page works without it: the manifest is
// selectable text and a JSON download.
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button.copy[data-copy-target]")) {
    const target = document.getElementById(button.dataset.copyTarget);
    if (!target || !navigator.clipboard) continue;
    button.hidden = false;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(target.textContent);
        button.textContent = "Copied";
      } catch {
        button.textContent = "Copy failed: select the text instead";
      }
    });
  }
});
