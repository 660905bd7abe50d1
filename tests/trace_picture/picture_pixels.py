"""Pixel counts in a rank's row of a picture that trace_show.py drew, where its render functions say the row lies."""

import numpy as np

import trace_show


def band_of(img, layout, rank):
    """Rank's row of the picture, inside the axes (the legend beside them has red too)."""
    top, bottom = layout["rows"][rank]
    left, right = layout["columns"]
    return img[top:bottom, left:right, :3]


def red_pixels(img, layout, rank):
    """Pixels of the last arriver's red in rank's row."""
    band = band_of(img, layout, rank)
    return int(np.sum((band[..., 0] > 0.8) & (band[..., 1] < 0.15) & (band[..., 2] < 0.15)))


def pale_blue_pixels(img, layout, rank):
    """The allreduce colour (#1f77b4) washed out under white: a waiting part."""
    band = band_of(img, layout, rank)
    pale = np.array([0x1F, 0x77, 0xB4]) / 255.0 * (1 - trace_show.WAIT_ALPHA) + trace_show.WAIT_ALPHA
    return int(np.sum(np.all(np.abs(band - pale) < 0.04, axis=2)))
