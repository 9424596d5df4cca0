"""matplotlib for the course's figures: imported when a figure is drawn (importing the course's
modules costs nothing), with fonts for every language of the course.

DejaVu Sans draws Latin text as before; a CJK font, where the machine has one (Debian:
`fonts-noto-cjk`), is the fallback for the glyphs DejaVu lacks, so that a Japanese title or label
renders instead of empty boxes.
"""

CJK_FONTS = ("Noto Sans CJK JP", "Noto Sans JP", "IPAexGothic", "IPAGothic", "TakaoGothic")
_cjk = None  # the CJK font found ("" for none), once per process


def cjk_font():
    """The first CJK font matplotlib finds (its font list is made again once when there is none:
    fonts installed after matplotlib's cache was written), or None."""
    from matplotlib import font_manager
    for attempt in range(2):
        names = {font.name for font in font_manager.fontManager.ttflist}
        found = next((name for name in CJK_FONTS if name in names), None)
        if found or attempt:
            return found
        font_manager.fontManager = font_manager._load_fontmanager(try_read_cache=False)
        font_manager.findfont = font_manager.fontManager.findfont  # the module's alias of the old one
    return None


def pyplot(backend=None):
    """matplotlib.pyplot, with `backend` chosen first (e.g. "Agg" for files) and the CJK font
    (found once) as the last font family: checked at every call, as matplotlib.style.context and
    rcdefaults put the fonts back."""
    global _cjk
    import matplotlib
    if backend:
        matplotlib.use(backend)
    import matplotlib.pyplot as plt
    if _cjk is None:
        _cjk = cjk_font() or ""
    families = list(matplotlib.rcParams["font.family"])
    if _cjk and _cjk not in families:
        # Font fallback goes along font.family (a generic name gives one font): the CJK font last.
        matplotlib.rcParams["font.family"] = [*families, _cjk]
    return plt
