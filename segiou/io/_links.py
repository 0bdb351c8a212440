"""Where a file is, and where its links lead: folder identities and link chains.

The ground truth and the predictions must not share files (:func:`segiou.io.png.check_apart`
for PNG folders, :func:`segiou.io.sources.open_pair` for Zarr stores): folders are compared
by identity (device and inode: links followed, bind mounts seen through), and a file that is
a link (through any chain) to a file the other side lists is that file.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MAX_HOPS", "Place", "folder_id", "linked_across", "links_into", "places"]

#: Where a file's name is: its folder (``(st_dev, st_ino)``, else its resolved path) and name.
Place = tuple[tuple[int, int] | str, str]
#: Links followed from one file link before giving up (the kernel's own limit is 40).
MAX_HOPS = 40


def folder_id(folder: str, seen: dict[str, tuple[int, int] | str]) -> tuple[int, int] | str:
    """Identity of a folder: ``(st_dev, st_ino)`` (links followed, bind mounts seen through).

    Its resolved path when it cannot be read (the listing reports that). Each folder once.
    """
    got = seen.get(folder)
    if got is None:
        try:
            st = Path(folder).stat()  # (a bind mount has the device and inode of what it mounts)
            got = (st.st_dev, st.st_ino)
        except OSError:
            got = os.path.realpath(folder)
        seen[folder] = got
    return got


def _place(path: str, seen: dict[str, tuple[int, int] | str]) -> Place:
    folder, name = os.path.split(path)
    return folder_id(folder, seen), name


def _link_hops(path: str, seen: dict[str, tuple[int, int] | str]) -> list[Place]:
    """Return the places a file link leads through, to its target (``[]``: not a link)."""
    hops: list[Place] = []
    link = Path(path)
    for _ in range(MAX_HOPS):
        try:
            target = link.readlink()
        except OSError:  # not a link: the end of the chain (or unreadable: listing said so)
            break
        link = link.parent / target  # (an absolute target replaces the folder)
        hops.append(_place(str(link), seen))
    return hops


def places(
    paths: tuple[str, ...], seen: dict[str, tuple[int, int] | str]
) -> tuple[dict[Place, str], dict[str, list[Place]]]:
    """Each file's own place -> its path; each file link's path -> the places it leads to.

    A file's own place is its folder's identity and its name: folder links are followed (a
    folder linked into the other side, or the same folder bind-mounted elsewhere, is the same
    folder) but not a link that is the file itself, whose targets are kept apart. Datasets
    kept as links into a content-addressed cache (the Hugging Face hub cache, git-annex, DVC)
    link every identical mask to one blob, so a perfect prediction, or an empty mask on both
    sides, links to its ground truth's target without the two sides sharing a file; a link
    to a file the other side lists is that file.
    """
    own = {}
    links = {}
    for p in paths:
        own[_place(p, seen)] = p
        if hops := _link_hops(p, seen):
            links[p] = hops
    return own, links


def links_into(links: dict[str, list[Place]], other: dict[Place, str]) -> list[tuple[str, str]]:
    """File links that lead through a file of ``other``: (link, that file), in order."""
    found = []
    for path, hops in links.items():
        hit = next((other[h] for h in hops if h in other), None)
        if hit is not None:
            found.append((path, hit))
    return found


def linked_across(
    gt: tuple[dict[Place, str], dict[str, list[Place]]],
    pred: tuple[dict[Place, str], dict[str, list[Place]]],
) -> tuple[list[tuple[str, str]], str, str]:
    """Links of one side leading through a file the other side lists (from :func:`places`).

    Returns ``(found, side, other)``: the prediction files' links into the ground truth first
    (``"prediction"``, ``"ground-truth"``), else the reverse; ``found`` is empty when neither.
    """
    (gt_own, gt_links), (pred_own, pred_links) = gt, pred
    found = links_into(pred_links, gt_own)
    if found:
        return found, "prediction", "ground-truth"
    return links_into(gt_links, pred_own), "ground-truth", "prediction"
