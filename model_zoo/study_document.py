"""The studies' markdown documents: an intro, then one ``## `` section per study, where a run
replaces only the sections it wrote and keeps the others."""
import os


def section_title(text):
    return text.split(" (", 1)[0]  # "## small CNN on MNIST 5k (4,000 training ...)" -> its name


def write_document(path, intro, sections, order):
    """Rewrites ``path`` with ``intro`` and, per study, the new section or else the one it had;
    ``order`` lists the section titles in document order (others follow)."""
    kept = {}
    if os.path.exists(path):
        with open(path) as f:
            for part in f.read().split("\n## ")[1:]:
                kept[section_title("## " + part)] = "## " + part.rstrip("\n") + "\n"
    kept.update({section_title(text): text for text in sections})
    titles = [t for t in order if t in kept] + [t for t in kept if t not in order]
    with open(path, "w") as f:
        f.write("\n".join(intro) + "\n" + "\n".join(kept[t] for t in titles))
