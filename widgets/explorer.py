"""`BufferExplorer`: paged rows of a `BufferView` (numbers, thumbnails for images), per-key statistics, a histogram.

explorer = BufferExplorer(buffer.view())      # or a DataBuffer, or a TensorDict
explorer.next_page(); explorer.select("next.reward")
"""

from __future__ import annotations

import base64
import io
from typing import Any, Dict, List, Optional

from rlightning.widgets._base import esc, html_table, ipywidgets_or_none


def _as_tensordict(source: Any) -> Any:
    if hasattr(source, "view") and callable(source.view) and hasattr(source, "stats"):
        source = source.view()  # a DataBuffer
    if hasattr(source, "to_tensordict") and not hasattr(source, "batch_dims"):
        source = source.to_tensordict()  # a BufferView
    if not hasattr(source, "keys") or not hasattr(source, "batch_size"):
        raise TypeError(f"BufferExplorer takes a BufferView, a DataBuffer or a TensorDict, got {type(source).__name__}")
    return source.reshape(-1) if len(source.batch_size) > 1 else source


def _is_image(t: Any) -> bool:
    return (
        str(t.dtype) == "torch.uint8"
        and t.dim() >= 3
        and t.shape[-1] in (1, 3, 4)
        or (str(t.dtype) == "torch.uint8" and t.dim() == 3)
    )


def _thumb(t: Any, size: int = 48) -> str:
    from PIL import Image

    arr = t.detach().cpu().numpy()
    if arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4):  # channels first, or stacked frames: the first
        arr = arr[0]
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    img = Image.fromarray(arr)
    img.thumbnail((size, size))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return f"<img src='data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}'/>"


def _cell(t: Any) -> str:
    if _is_image(t):
        return _thumb(t)
    flat = t.flatten()
    vals = flat[:4].tolist()
    text = ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in vals)
    return esc(text + (", ..." if flat.numel() > 4 else ""))


class BufferExplorer:
    """Page through stored rows and look at the distribution of one key.

    Args:
        source: A `BufferView`, a `DataBuffer` (its current ``view()``) or a TensorDict.
        page_size: Rows per page.
    """

    def __init__(self, source: Any, page_size: int = 10) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be an int >= 1, got {page_size!r}")
        self.td = _as_tensordict(source)
        self.page_size = page_size
        self.page = 0
        self.keys: List[str] = [
            ".".join(k) if isinstance(k, tuple) else k for k in self.td.keys(include_nested=True, leaves_only=True)
        ]
        numeric = [k for k in self.keys if self._tensor(k).dtype.is_floating_point]
        self.selected: Optional[str] = numeric[0] if numeric else (self.keys[0] if self.keys else None)
        self.state: Dict[str, Any] = {}
        self._w = ipywidgets_or_none()
        self.widget = None
        if self._w is not None:
            w = self._w
            self.prev_button = w.Button(description="< prev")
            self.next_button = w.Button(description="next >")
            self.key_menu = w.Dropdown(options=self.keys, value=self.selected, description="histogram")
            self.table = w.HTML()
            self.hist = w.Image(format="png")
            self.prev_button.on_click(lambda _b: self.prev_page())
            self.next_button.on_click(lambda _b: self.next_page())
            self.key_menu.observe(lambda ch: self.select(ch["new"]), names="value")
            self.widget = w.VBox(
                [w.HBox([self.prev_button, self.next_button, self.key_menu]), self.table, self.hist],
                _dom_classes=["rlightning-explorer"],
            )
        self.refresh()

    def _tensor(self, key: str) -> Any:
        return self.td.get(tuple(key.split(".")))

    @property
    def pages(self) -> int:
        """Number of pages."""
        return max(1, -(-len(self.td) // self.page_size))

    def next_page(self) -> Dict[str, Any]:
        """Go one page on (stays on the last); returns the state."""
        self.page = min(self.page + 1, self.pages - 1)
        return self.refresh()

    def prev_page(self) -> Dict[str, Any]:
        """Go one page back (stays on the first); returns the state."""
        self.page = max(self.page - 1, 0)
        return self.refresh()

    def select(self, key: str) -> Dict[str, Any]:
        """Show the histogram and statistics of ``key``.

        Raises:
            KeyError: not a key of the data (the message lists them).
        """
        if key not in self.keys:
            raise KeyError(f"no key {key!r} in the data; keys: {', '.join(self.keys)}")
        self.selected = key
        return self.refresh()

    def stats(self) -> Dict[str, Dict[str, float]]:
        """Mean, std, min and max of every numeric key."""
        out = {}
        for key in self.keys:
            t = self._tensor(key)
            if t.numel() == 0 or t.dtype == __import__("torch").bool:
                continue
            f = t.float()
            out[key] = {
                "mean": f.mean().item(),
                "std": f.std().item() if f.numel() > 1 else 0.0,
                "min": f.min().item(),
                "max": f.max().item(),
            }
        return out

    def refresh(self) -> Dict[str, Any]:
        """Recompute the page, the statistics and the histogram; returns the state."""
        start = self.page * self.page_size
        rows = []
        for i in range(start, min(start + self.page_size, len(self.td))):
            rows.append([str(i)] + [_cell(self._tensor(k)[i]) for k in self.keys])
        self.state = {
            "rows_total": len(self.td),
            "page": self.page,
            "pages": self.pages,
            "keys": list(self.keys),
            "page_rows": rows,
            "selected": self.selected,
            "stats": self.stats(),
        }
        if self.widget is not None:
            self.table.value = self.render_html()
            png = self.histogram_png()
            if png is not None:
                self.hist.value = png
        return self.state

    def histogram_png(self) -> Optional[bytes]:
        """PNG histogram of the selected key (None when it has no numbers)."""
        if self.selected is None or self.selected not in self.state.get("stats", {}):
            return None
        from rlightning.widgets.charts import _new_figure, _png

        fig, (ax,) = _new_figure(1, 420, 200)
        ax.hist(self._tensor(self.selected).float().flatten().numpy(), bins=40)
        ax.set_title(self.selected, fontsize=9)
        ax.tick_params(labelsize=7)
        return _png(fig)

    def render_html(self) -> str:
        """The page as an HTML table (cells are escaped text or thumbnails), then the statistics."""
        s = self.state
        head = "".join(f"<th style='text-align:left;padding:0 6px'>{esc(h)}</th>" for h in ["row", *s["keys"]])
        body = "".join(
            "<tr>" + "".join(f"<td style='padding:0 6px'>{c}</td>" for c in row) + "</tr>" for row in s["page_rows"]
        )
        stats = html_table(
            ["key", "mean", "std", "min", "max"],
            [[k, *(f"{v[m]:.3g}" for m in ("mean", "std", "min", "max"))] for k, v in s["stats"].items()],
        )
        return (
            f"<div class='rlightning-explorer-page'><b>{s['rows_total']} rows</b>, page {s['page'] + 1}/{s['pages']}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{stats}</div>"
        )

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.widget if self.widget is not None else HTML(self.render_html()))
